//! One model request, its stream watched by the checks that work while a reply streams
//! ([`crate::checks::Check::watch`]).

use std::ops::ControlFlow;

use crate::backend::{Backend, BackendError, ChatReply, ChatRequest};
use crate::checks::{Checks, Loop};
use crate::deadline::Deadline;

/// Sends one request with the stream watched by the checks that work there: each piece
/// of text goes to `on_text`, and a loop one of them finds stops the generation and cuts the reply after what came before it. The loop
/// found, if any, comes back with the reply. `on_text` may stop the generation too
/// (a person pressed stop).
pub fn watched_chat(
    backend: &mut dyn Backend,
    request: &ChatRequest<'_>,
    deadline: Deadline,
    checks: &Checks,
    mut on_text: impl FnMut(&str) -> ControlFlow<()>,
) -> Result<(ChatReply, Option<Loop>), BackendError> {
    let mut watchers = checks.watchers();
    let mut found = None;
    let mut sink = |piece: &str| {
        on_text(piece)?;
        match watchers.iter_mut().find_map(|w| w.feed(piece)) {
            Some(l) => {
                found = Some(l);
                ControlFlow::Break(())
            }
            None => ControlFlow::Continue(()),
        }
    };
    let mut reply = backend.chat(request, deadline, &mut sink)?;
    if let Some(l) = &found
        && reply.text.is_char_boundary(l.keep)
    {
        reply.text.truncate(l.keep);
    }
    Ok((reply, found))
}
