//! llama-server's own extras for questions aside (the fit question): which slot they
//! go to, whether it is free, and this process's requests under way. Another
//! OpenAI-compatible server answers none of `/props` and `/slots`, and is sent none of
//! this.

use std::time::Duration;

use serde_json::Value;

use super::OpenAi;
use crate::deadline::Deadline;
use crate::http;

/// What llama-server's `/props` said; all empty for another server.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Props {
    /// Whether the server is llama-server: it answered with its slot count.
    pub(super) llama: bool,
    /// The slot questions aside go to; `None` where the server has one slot.
    pub(super) aside: Option<AsideSlot>,
}

/// llama-server's slot for questions aside, as `/props` described it.
#[derive(Debug, Clone, Copy)]
pub(super) struct AsideSlot {
    pub(super) id: u32,
    /// Whether the server answers `GET /slots`, which says whether the slot is busy.
    seen: bool,
}

impl OpenAi {
    /// Learns, once, whether the server is llama-server and which slot questions aside go
    /// to: its last slot where it has two or more. On one slot a fit question between two
    /// turns takes the turn's tokens out of the slot, and the next turn gets back from the
    /// server's host-memory cache whichever saved prompt keeps the larger share of its own
    /// tokens, which after a turn asked again was once another run's
    /// (`tests/real_model.rs`, `the_prompt_cache_holds_across_every_request_of_a_run`). In
    /// a slot of their own the questions leave the turn's slot alone. Another server has
    /// no `/props`, and gets no `id_slot`.
    ///
    /// Asked on `agent`, the request's own, so that the stop button cuts it off; a
    /// question cut off that way learns nothing, and the next request asks again.
    pub(super) fn learn_props(&self, agent: &ureq::Agent, deadline: &Deadline) {
        if self.props.get().is_some() {
            return;
        }
        let props = self.server_json(agent, "props", Duration::from_secs(2), deadline);
        if self.stop.as_ref().is_some_and(|s| s.is_stopped()) {
            return;
        }
        self.learn_from(props.as_ref());
    }

    /// What `props`, llama-server's answer at `/props` (`None`: no answer), says, kept
    /// for this backend and its clones.
    pub(super) fn learn_from(&self, props: Option<&Value>) {
        let slots = props.and_then(|props| {
            let seen = props["endpoint_slots"].as_bool().unwrap_or(false);
            Some((props["total_slots"].as_u64()?, seen))
        });
        let aside = slots
            .filter(|(n, _)| (2..=u64::from(u32::MAX)).contains(n))
            .map(|(n, seen)| AsideSlot {
                id: (n - 1) as u32,
                seen,
            });
        let _ = self.props.set(Props {
            llama: slots.is_some(),
            aside,
        });
        let path = props
            .and_then(|p| p["model_path"].as_str())
            .filter(|p| !p.is_empty());
        let _ = self.model_path.set(path.map(Into::into));
    }

    /// The slot a question aside names now, if any, by the server's own `GET /slots`: none
    /// while the aside slot is busy. Several toolloop processes on one server (a script
    /// running `toolloop ask` four at once) each count only their own requests, so each
    /// named the same slot: their questions waited in line for it, a median 15.5 s against
    /// 5.6 s unnamed. A server without the endpoint gets the aside slot named on the
    /// process's own count alone; one whose answer does not come or cannot be read gets no
    /// slot named, since a wait is the risk.
    ///
    /// A turn names no slot, and llama-server puts it in the idle slot whose tokens share
    /// the longest start with its prompt. That can be the aside slot, where an earlier
    /// question aside with the same system prompt left its tokens: the fit question then
    /// took the turn's tokens out, and the turn asked again after it reused 246 of the 271
    /// tokens it sent (`tests/real_model.rs`,
    /// `the_prompt_cache_holds_across_every_request_of_a_run`, on CI). So where the aside
    /// slot holds the latest task of the idle slots, which with no other request of this
    /// process under way is this run's turn, the question goes to the idle slot used
    /// longest ago instead.
    pub(super) fn aside_slot(&self, agent: &ureq::Agent, deadline: &Deadline) -> Option<u32> {
        let slot = self.props.get().and_then(|p| p.aside)?;
        if !slot.seen {
            return Some(slot.id);
        }
        let slots = self.server_json(agent, "slots", Duration::from_secs(1), deadline)?;
        aside_of(slots.as_array()?, slot.id)
    }

    /// After a reply stopped at its end while the server was still writing it, waits
    /// until the server has let go of the slot that wrote it, so that the next turn finds
    /// that slot idle. The server learns of the closed connection at its next token and
    /// frees the slot a step later; a turn sent in between goes to another slot and
    /// evaluates again all but the system prompt (`numbers-left` asks again at once, so on
    /// CI its turn did). With one slot the server holds the next request until the slot
    /// is free, and without `GET /slots` there is nothing to watch; the wait ends at half
    /// a second in any case.
    ///
    /// `GET /slots` shows no text, so the slot is known by its task's counts: the prompt
    /// tokens evaluated and reused (the `timings` the server sent with the reply) and at
    /// least the `pieces` it wrote.
    pub(super) fn await_release(
        &self,
        agent: &ureq::Agent,
        timings: &Value,
        pieces: u64,
        deadline: &Deadline,
    ) {
        let watched = self
            .props
            .get()
            .and_then(|p| p.aside)
            .is_some_and(|a| a.seen);
        let task = (timings["prompt_n"].as_u64(), timings["cache_n"].as_u64());
        let (true, (Some(evaluated), Some(reused))) = (watched, task) else {
            return;
        };
        let started = std::time::Instant::now();
        while started.elapsed() < Duration::from_millis(500) {
            let Some(slots) =
                self.server_json(agent, "slots", Duration::from_millis(500), deadline)
            else {
                return;
            };
            let slots = slots.as_array().map_or(&[][..], Vec::as_slice);
            if !writing(slots, (evaluated, reused), pieces) {
                log::debug!(
                    "the slot of the reply stopped at its end is free after {} ms",
                    started.elapsed().as_millis()
                );
                return;
            }
            if !super::super::pause(Duration::from_millis(10), self.stop.as_ref()) {
                return;
            }
        }
    }

    /// `GET {root}/{path}` of llama-server's own API, read as JSON within `wait` and the
    /// deadline; `None` for any failure, which each caller takes as "not llama-server" or
    /// "do not name the slot".
    pub(super) fn server_json(
        &self,
        agent: &ureq::Agent,
        path: &str,
        wait: Duration,
        deadline: &Deadline,
    ) -> Option<Value> {
        let root = self.base.strip_suffix("/v1").unwrap_or(&self.base);
        let budget = http::budget(deadline, wait)?;
        let mut req = agent
            .get(format!("{root}/{path}"))
            .config()
            .timeout_global(Some(budget))
            .build();
        if let Some(key) = &self.api_key {
            req = req.header("Authorization", format!("Bearer {key}"));
        }
        let resp = req.call().ok()?;
        let (body, _) = http::read_capped(resp.into_body().into_reader(), 1 << 20).ok()?;
        serde_json::from_slice(&body).ok()
    }
}

/// Where a question aside goes, from `GET /slots`: the aside slot `aside` while it is
/// idle and does not hold the latest task of the idle slots; else the idle slot whose
/// task is the oldest (one never used first); none while the aside slot is busy or no
/// other slot is idle.
fn aside_of(slots: &[Value], aside: u32) -> Option<u32> {
    let idle: Vec<(u32, Option<u64>)> = slots
        .iter()
        .filter(|s| s["is_processing"].as_bool() == Some(false))
        .filter_map(|s| {
            let id = u32::try_from(s["id"].as_u64()?).ok()?;
            Some((id, s["id_task"].as_u64()))
        })
        .collect();
    let (_, task) = *idle.iter().find(|(id, _)| *id == aside)?;
    let latest = idle.iter().filter_map(|(_, t)| *t).max();
    if task.is_none() || task != latest {
        return Some(aside);
    }
    idle.iter()
        .filter(|(id, _)| *id != aside)
        .min_by_key(|(_, t)| *t)
        .map(|(id, _)| *id)
}

/// Whether a slot in `GET /slots` is still writing a reply whose prompt the server
/// evaluated and reused `(evaluated, reused)` tokens of, `pieces` tokens into it.
fn writing(slots: &[Value], (evaluated, reused): (u64, u64), pieces: u64) -> bool {
    slots.iter().any(|s| {
        s["is_processing"].as_bool() == Some(true)
            && s["n_prompt_tokens_processed"].as_u64() == Some(evaluated)
            && s["n_prompt_tokens_cache"].as_u64() == Some(reused)
            && s["next_token"][0]["n_decoded"]
                .as_u64()
                .is_some_and(|n| n >= pieces)
    })
}

/// This process's requests under way, per server: one is counted from before it is sent
/// until its reply is read or dropped.
///
/// Only a question asked while no other request of the process to the server is under way
/// names the slot: with four runs at once on four slots, questions waiting for a named slot
/// that was busy stalled Gemma 3 270M's llama-server twice, for 76 and 108 s with every
/// slot idle, until the runs timed out.
#[derive(Debug)]
pub(super) struct InFlight(String);

static IN_FLIGHT: std::sync::LazyLock<std::sync::Mutex<std::collections::HashMap<String, usize>>> =
    std::sync::LazyLock::new(Default::default);

impl InFlight {
    /// Counts a request to `base`; `true` when it is the only one under way.
    pub(super) fn enter(base: &str) -> (Self, bool) {
        let mut all = IN_FLIGHT.lock().unwrap_or_else(|p| p.into_inner());
        let n = all.entry(base.to_string()).or_default();
        *n += 1;
        (InFlight(base.to_string()), *n == 1)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut all = IN_FLIGHT.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = all.get_mut(&self.0) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                all.remove(&self.0);
            }
        }
    }
}
