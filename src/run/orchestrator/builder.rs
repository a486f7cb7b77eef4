//! The builder of an [`Orchestrator`], the one-call `run_loop`, and the handler
//! that answers the model's questions.

use std::time::Duration;

use super::{Orchestrator, OrchestratorError};
use crate::backend::{Backend, GenOptions};
use crate::checks::Checks;
use crate::config::Config;
use crate::deadline::{Deadline, StopHandle};
use crate::run::engine::Prepared;
use crate::run::events::Observer;
use crate::run::guardrails::Guardrails;
use crate::tools::closure::{FnTool, FnTools};
use crate::tools::{Catalogue, ToolSetup, ToolSource};
use crate::turn::prompt::system_prompt;
use crate::turn::schema::{Decide, Narrowing};

/// Answers the model's clarifying questions (the command line asks the person at the
/// terminal). Any `FnMut(&str, &[String]) -> Option<String>` is one.
pub trait ClarifyHandler: Send {
    /// Returns the answer, or `None` when there is none.
    fn ask(&mut self, question: &str, missing_params: &[String]) -> Option<String>;
}

impl<F: FnMut(&str, &[String]) -> Option<String> + Send> ClarifyHandler for F {
    fn ask(&mut self, question: &str, missing_params: &[String]) -> Option<String> {
        self(question, missing_params)
    }
}

impl ClarifyHandler for Box<dyn ClarifyHandler> {
    fn ask(&mut self, question: &str, missing_params: &[String]) -> Option<String> {
        (**self).ask(question, missing_params)
    }
}

/// The whole loop in one call: asks the configured model, with the configured tools, and
/// returns the answer.
///
/// ```no_run
/// use toolloop::{run_loop, Config};
///
/// let answer = run_loop("What is the weather in Tokyo?", &Config::default())?;
/// println!("{answer}");
/// # Ok::<(), toolloop::OrchestratorError>(())
/// ```
pub fn run_loop(query: &str, config: &Config) -> Result<String, OrchestratorError> {
    Orchestrator::from_config(config)?
        .build()?
        .run(query)?
        .into_answer()
}

/// Builds an [`Orchestrator`]. Every setter sets one thing, so their order does not
/// matter; tool sources are connected by [`OrchestratorBuilder::build`].
pub struct OrchestratorBuilder {
    backend: Option<Box<dyn Backend>>,
    config: Config,
    catalogue: Catalogue,
    sources: Vec<Box<dyn ToolSource>>,
    closures: FnTools,
    observers: Vec<Box<dyn Observer>>,
    clarify: Option<Box<dyn ClarifyHandler>>,
    approver: Option<Box<dyn crate::Approver>>,
    guardrails: Guardrails,
    preflight: bool,
    stop: StopHandle,
    shared: Option<std::sync::Arc<Catalogue>>,
    /// Settings that could not be taken, reported by [`OrchestratorBuilder::build`].
    errors: Vec<String>,
}

impl OrchestratorBuilder {
    /// The model backend (required). A `Box<dyn Backend>` is one too.
    pub fn backend(mut self, backend: impl Backend + 'static) -> Self {
        self.backend = Some(Box::new(backend));
        self
    }

    /// Who is asked before a call of a tool that is not read-only runs, unless the
    /// person's [`crate::Permissions`] decided it already. Without one such a call is
    /// not run: nobody can be asked.
    pub fn approver(mut self, approver: impl crate::Approver + 'static) -> Self {
        self.approver = Some(Box::new(approver));
        self
    }

    /// A Rust function as a tool (see [`FnTool`]).
    pub fn tool(mut self, tool: FnTool) -> Self {
        self.closures.push(tool);
        self
    }

    /// HTTP tool APIs, MCP servers and the built-in tools, connected by `build`.
    pub fn tools(mut self, setup: ToolSetup) -> Self {
        self.config.tools = setup;
        self
    }

    /// Any other source of tools, listed by `build`.
    pub fn source(mut self, source: impl ToolSource + 'static) -> Self {
        self.sources.push(Box::new(source));
        self
    }

    /// Tools already connected, to which the others are added.
    pub fn catalogue(mut self, catalogue: Catalogue) -> Self {
        self.catalogue = catalogue;
        self
    }

    /// Tools connected once and shared by several orchestrators (a web server's
    /// conversations): no other tools may be added to them.
    pub fn shared_catalogue(mut self, catalogue: std::sync::Arc<Catalogue>) -> Self {
        self.shared = Some(catalogue);
        self
    }

    /// Every setting of `config` at once (limits, options, the decision, the tools it
    /// names); its backend is not made from it: give one with
    /// [`OrchestratorBuilder::backend`].
    pub fn settings(mut self, config: Config) -> Self {
        self.config = config;
        self
    }

    /// The most model turns (default 10).
    pub fn max_iterations(mut self, n: u32) -> Self {
        self.config.max_iterations = n;
        self
    }

    /// One deadline for each run (default 30 s).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.config.timeout = timeout;
        self
    }

    /// The longest connecting the tool sources may take (default 10 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.config.connect_timeout = timeout;
        self
    }

    /// Generation options; `num_ctx` is also the window the history is kept in.
    pub fn options(mut self, options: GenOptions) -> Self {
        self.config.options = options;
        self
    }

    /// How the schema is narrowed to the catalogue (default: one variant per tool).
    pub fn narrowing(mut self, narrowing: Narrowing) -> Self {
        self.config.narrowing = narrowing;
        self
    }

    /// How the model decides between a tool and an answer (see [`Decide`]).
    pub fn decide(mut self, decide: Decide) -> Self {
        self.config.decide = decide;
        self
    }

    /// The most tool calls one model turn may carry; they run side by side (default 1).
    pub fn max_calls_per_turn(mut self, n: u32) -> Self {
        self.config.max_calls_per_turn = n;
        self
    }

    /// Turns the check called `name` on or off ([`crate::checks`] lists them); an
    /// unknown name is a configuration error when the orchestrator is built.
    pub fn check(mut self, name: &str, on: bool) -> Self {
        if let Err(e) = self.config.checks.set(name, on) {
            self.errors.push(e);
        }
        self
    }

    /// Extra instructions appended to the system prompt.
    pub fn system(mut self, text: impl Into<String>) -> Self {
        self.config.system = Some(text.into());
        self
    }

    /// The date the model is told it is where a tool takes a date (default: the
    /// computer's, as each run starts).
    pub fn today(mut self, today: crate::Today) -> Self {
        self.config.today = today;
        self
    }

    /// Sees every event; several observers see them in the order they were added.
    pub fn observer(mut self, observer: impl Observer + 'static) -> Self {
        self.observers.push(Box::new(observer));
        self
    }

    /// Answers clarifying questions; without one, a question ends the run.
    pub fn clarify_handler(mut self, handler: impl ClarifyHandler + 'static) -> Self {
        self.clarify = Some(Box::new(handler));
        self
    }

    /// Guardrails on the query and the answer.
    pub fn guardrails(mut self, guardrails: Guardrails) -> Self {
        self.guardrails = guardrails;
        self
    }

    /// What stops a run from another thread (see [`StopHandle`]); one is made otherwise,
    /// and [`Orchestrator::stop_handle`] gives it.
    pub fn stop_handle(mut self, stop: StopHandle) -> Self {
        self.stop = stop;
        self
    }

    /// Whether to check the server and model before the first run (default true).
    pub fn preflight(mut self, on: bool) -> Self {
        self.preflight = on;
        self
    }

    /// Connects the tool sources (within the connect timeout) and builds the
    /// orchestrator; a backend is required.
    pub fn build(mut self) -> Result<Orchestrator, OrchestratorError> {
        let mut backend = self
            .backend
            .ok_or_else(|| OrchestratorError::Config("no model backend was given".into()))?;
        backend.watch(&self.stop);
        // Keyed by the backend's own model and server: a backend given to the builder
        // need not be the one the config names.
        let key = backend
            .identity()
            .unwrap_or_else(|| (self.config.model.clone(), self.config.server()));
        self.config = self
            .config
            .calibrated_for(&key)
            .map_err(OrchestratorError::Config)?;
        // Each check's default for the model a server runs; a script (a test's double)
        // is no model of a family, whatever the config's default name says.
        if let Some((model, _)) = backend.identity() {
            self.config.checks.for_model(&model);
        }
        if let Some(e) = self.errors.first() {
            return Err(OrchestratorError::Config(e.clone()));
        }
        if self.config.max_iterations == 0 {
            return Err(OrchestratorError::Config(
                "max_iterations must be at least 1".into(),
            ));
        }
        let more =
            !self.config.tools.is_empty() || !self.sources.is_empty() || !self.closures.is_empty();
        let catalogue = match self.shared {
            Some(_) if more => {
                return Err(OrchestratorError::Config(
                    "a shared catalogue cannot take more tools".into(),
                ));
            }
            Some(shared) => shared,
            None => {
                let deadline = Deadline::after(self.config.connect_timeout);
                let mut catalogue = self.catalogue;
                self.config
                    .tools
                    .connect_into(&mut catalogue, deadline)
                    .map_err(OrchestratorError::tools)?;
                for source in self.sources {
                    catalogue
                        .add_source(source, deadline)
                        .map_err(OrchestratorError::tools)?;
                }
                if !self.closures.is_empty() {
                    catalogue
                        .add_source(Box::new(self.closures), deadline)
                        .map_err(OrchestratorError::tools)?;
                }
                std::sync::Arc::new(catalogue)
            }
        };
        let specs = catalogue.specs();
        self.config
            .permissions
            .check(&specs)
            .map_err(OrchestratorError::Config)?;
        let decide = self.config.decide;
        let prompt = system_prompt(
            &specs,
            self.config.system.as_deref(),
            decide,
            self.config.max_calls_per_turn,
        );
        let mut prepared = Prepared::new(&specs, &self.config);
        if let Some(model) = backend.identity() {
            let baselines = crate::checks::Leanings::of_model(model.clone());
            prepared.fit_baselines = match &self.config.leanings {
                Some(path) => baselines.kept_in(path, model),
                None => baselines,
            };
        }
        let prepared = std::sync::Arc::new(prepared);
        Ok(Orchestrator {
            backend,
            options: self.config.request_options(),
            specs,
            prepared,
            catalogue,
            observers: self.observers,
            clarify: self.clarify,
            approver: self.approver,
            always: Default::default(),
            guardrails: self.guardrails,
            prompt,
            preflight_done: !self.preflight,
            family_said: false,
            stop: self.stop,
            checks: Checks::new(&self.config.checks),
            checked: Vec::new(),
            approved: Vec::new(),
            hand_back: false,
            config: self.config,
        })
    }
}

impl Orchestrator {
    /// A builder with the defaults of [`Config`] and no tools.
    pub fn builder() -> OrchestratorBuilder {
        OrchestratorBuilder {
            backend: None,
            config: Config {
                tools: ToolSetup::default(),
                ..Config::default()
            },
            catalogue: Catalogue::new(),
            sources: Vec::new(),
            closures: FnTools::new(),
            observers: Vec::new(),
            clarify: None,
            approver: None,
            guardrails: Guardrails::default(),
            preflight: true,
            stop: StopHandle::default(),
            shared: None,
            errors: Vec::new(),
        }
    }

    /// A builder for everything `config` names: its backend, its tools, its limits.
    pub fn from_config(config: &Config) -> Result<OrchestratorBuilder, OrchestratorError> {
        let backend = config
            .backend()
            .map_err(|e| OrchestratorError::backend(e, Vec::new()))?;
        Ok(OrchestratorBuilder {
            backend: Some(backend),
            config: config.clone(),
            ..Orchestrator::builder()
        })
    }
}
