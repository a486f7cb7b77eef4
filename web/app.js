// toolloop's page. Every string from the model or a tool goes into the page as text
// (textContent); the only HTML inserted is the `html` the server rendered from Markdown
// and sanitised (src/markdown.rs). The Content-Security-Policy lets no other script run.
"use strict";

const $ = (id) => document.getElementById(id);
const FOLD_CHARS = 600;
const FOLD_LINES = 12;

// Kept for the tab's life, so a reload shows the conversation again (a new tab starts
// its own).
const SAVED = "toolloop.conversation";
let conversation = sessionStorage.getItem(SAVED);
let current = null; // {run, source, view, timer}

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = String(text);
  return e;
}

async function api(method, path, body) {
  const init = { method, headers: {} };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const r = await fetch(path, init);
  let data = null;
  try { data = await r.json(); } catch (_) { data = null; }
  if (!r.ok) {
    const msg = (data && data.error) || `HTTP ${r.status}`;
    const err = new Error(msg);
    err.status = r.status;
    throw err;
  }
  return data;
}

function status(text) { $("status").textContent = text || ""; }

function seconds(ms) { return (ms / 1000).toFixed(1) + " s"; }

// A JSON text shown indented; anything else as it is. Long ones are folded.
function readable(text) {
  let shown = text;
  try { shown = JSON.stringify(JSON.parse(text), null, 2); } catch (_) { /* not JSON */ }
  return shown;
}

function block(text, html) {
  const body = el("div");
  if (html) {
    body.className = "markdown";
    body.innerHTML = html; // sanitised by the server (ammonia)
  } else {
    body.appendChild(el("pre", null, text));
  }
  const long = text.length > FOLD_CHARS || text.split("\n").length > FOLD_LINES;
  if (!long) return body;
  const d = el("details");
  d.appendChild(el("summary", null, `${text.length} characters (show)`));
  d.appendChild(body);
  return d;
}

function step(view, cls, label, text) {
  const li = el("li", "step " + cls);
  li.appendChild(el("span", "label", label));
  if (text) li.appendChild(el("span", null, text));
  view.steps.appendChild(li);
  return li;
}

// Whether the end of the page is in view. While it is, each new step or piece of the
// answer keeps it in view; a person who scrolled up to read is left where they are.
function atEnd() {
  const d = document.documentElement;
  return d.scrollHeight - (window.scrollY + window.innerHeight) < 60;
}

// The whole page scrolls, so its end is the newest step above the input bar (which
// sits at the end of the page's flow): nothing is left under it.
function toEnd() {
  window.scrollTo(0, document.documentElement.scrollHeight);
}

function newExchange(question) {
  const box = el("section", "exchange");
  box.appendChild(el("div", "user", question));
  const steps = el("ol", "steps");
  const answer = el("div", "answer streaming");
  const footer = el("div", "footer");
  box.append(steps, answer, footer);
  $("log").appendChild(box);
  $("welcome").hidden = true;
  return { box, steps, answer, footer, thinking: null, tokens: { prompt: 0, completion: 0, cached: 0 } };
}

function stopThinking(view, text) {
  if (!view.thinking) return;
  clearInterval(view.thinking.timer);
  view.thinking.li.lastChild.textContent = text;
  view.thinking = null;
}

function showClarify(view, run, question, missing) {
  const box = el("div", "clarify");
  box.appendChild(el("strong", null, "The model asks: "));
  box.appendChild(el("span", "question", question));
  if (missing && missing.length) box.appendChild(el("div", "muted", "missing: " + missing.join(", ")));
  const form = el("form");
  const input = el("input");
  input.name = "answer";
  input.required = true;
  input.maxLength = 16000;
  input.setAttribute("aria-label", "Your answer");
  const send = el("button", null, "Answer");
  send.type = "submit";
  form.append(input, send);
  box.appendChild(form);
  view.steps.appendChild(box);
  input.focus();
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const text = input.value.trim();
    if (!text) return;
    send.disabled = true;
    try {
      await api("POST", `/api/runs/${run}/answer`, { answer: text });
      form.remove();
      view.clarify = null;
    } catch (e) {
      send.disabled = false;
      status("Could not send the answer: " + e.message);
    }
  });
  view.clarify = box;
}

// A call of a tool that may change things waits for the person: the tool, its class and
// its arguments (text only, never markup), and yes, no or always for this tool.
function showApproval(view, run, e) {
  const box = el("div", "clarify approval");
  box.appendChild(el("strong", null, `Run ${e.tool}? `));
  box.appendChild(el("span", "muted", `${e.class} (${e.class_from === "person" ? "your setting" : e.class_from === "hints" ? "the tool's hints" : "no hints: taken as destructive"})`));
  box.appendChild(el("pre", "arguments", JSON.stringify(e.arguments, null, 2).slice(0, 4000)));
  // Values the person did not say, in the terminal's words: shown so they decide on what
  // will run.
  if (e.unsaid_line) {
    box.appendChild(el("div", "unsaid", e.unsaid_line[0].toUpperCase() + e.unsaid_line.slice(1)));
  }
  const row = el("div", "choices");
  const choices = [["yes", "Yes"], ["no", "No"], ["always", `Always ${e.tool} in this run`]];
  const optional = e.unsaid?.optional || [];
  if (optional.length) choices.push(["without", `Without ${optional.join(", ")}`]);
  for (const [answer, label] of choices) {
    const b = el("button", null, label);
    b.type = "button";
    b.dataset.answer = answer;
    b.addEventListener("click", async () => {
      row.querySelectorAll("button").forEach((x) => { x.disabled = true; });
      try {
        await api("POST", `/api/runs/${run}/approve`, { answer });
        row.remove();
      } catch (err) {
        row.querySelectorAll("button").forEach((x) => { x.disabled = false; });
        status("Could not send your answer: " + err.message);
      }
    });
    row.appendChild(b);
  }
  box.appendChild(row);
  view.steps.appendChild(box);
  view.approval = box;
}

const STOPS = {
  completed: "",
  tool_failure_degraded: "A tool was unavailable; the model answered without it.",
  clarification_needed: "The model needed more information and no answer came.",
  max_iterations: "No answer within the allowed iterations.",
  timeout: "No answer before the time limit.",
  blocked: "Blocked by a guardrail.",
  invalid_replies: "The model gave no valid turn to go on with.",
  cut_off: "A tool call was cut off at the token limit twice, so it was not run.",
  cancelled: "Stopped.",
};

// The endings whose `message` says more than the line above.
const DETAILED = new Set(["invalid_replies", "cut_off", "max_iterations", "timeout", "blocked"]);

// What the engine did on a check's word, as the step's title.
const CHECK_TITLES = {
  stop_stream: "Stopped a loop",
  decline: "Call declined",
  ask_model: "Asked for more calls",
  keep_turn: "Kept the first calls",
  hold: "Not run",
  ask_person: "Asked you instead",
  refuse_answer: "Answer refused",
};

function handle(view, run, e) {
  switch (e.event) {
    case "model_request": {
      const li = step(view, "thinking", e.answer_only ? "Answering" : "Thinking", "");
      li.appendChild(el("span", "elapsed", "0.0 s"));
      const started = Date.now();
      const timer = setInterval(() => { li.lastChild.textContent = seconds(Date.now() - started); }, 100);
      view.thinking = { li, timer };
      break;
    }
    case "call_written": {
      // Each call of a turn named once the model has closed it, while it writes on.
      const t = view.thinking;
      if (!t) break;
      if (!t.wrote) {
        t.wrote = el("span", "wrote", "");
        t.li.insertBefore(t.wrote, t.li.lastChild);
        t.calls = [];
      }
      t.calls.push(e.tool);
      t.wrote.textContent = "wrote " + t.calls.join(", ");
      break;
    }
    case "call_sent_early": {
      const li = step(view, "call early", "Started early", `${e.tool}: it only reads, so it runs while the model writes the rest of its turn`);
      li.appendChild(block(JSON.stringify(e.arguments, null, 2)));
      break;
    }
    case "early_call_unused":
      step(view, "repair", "Early call let go", `${e.tool} ${JSON.stringify(e.arguments)}: the turn did not make this call, so its result is not used`);
      break;
    case "model_reply":
      view.tokens.prompt += e.usage.prompt_tokens || 0;
      view.tokens.completion += e.usage.completion_tokens || 0;
      view.tokens.cached += e.usage.cached_prompt_tokens || 0;
      stopThinking(view, `${seconds(e.ms)}, ${e.usage.completion_tokens} tokens`);
      break;
    case "repaired":
      step(view, "repair", "Repaired", e.fixes.join(", "));
      break;
    case "invalid":
      step(view, "problem", `Invalid reply, asked again (attempt ${e.attempt})`, e.error);
      break;
    case "tool_call": {
      const li = step(view, "call", "Tool call", e.tool);
      li.appendChild(block(JSON.stringify(e.arguments, null, 2)));
      break;
    }
    case "tool_result": {
      const li = step(view, "result " + (e.ok ? "ok" : "failed"), e.ok ? "Result" : "Tool failed", `${e.tool}, ${e.ms} ms`);
      li.appendChild(block(e.html ? e.observation : readable(e.observation), e.html));
      break;
    }
    case "answer_text":
      view.answer.textContent += e.text;
      break;
    case "answer_retracted":
      view.answer.textContent = "";
      step(view, "problem", "Answer withdrawn", e.reason);
      break;
    case "clarify":
      stopThinking(view, "asked a question");
      showClarify(view, run, e.question, e.missing_params);
      break;
    case "clarify_answer":
      step(view, "call", "You answered", e.answer);
      break;
    case "check":
      step(view, "repair", `${CHECK_TITLES[e.action] || "Check"} (${e.check})`, e.line || e.why);
      break;
    case "approval_request":
      stopThinking(view, "waiting for your approval");
      showApproval(view, run, e);
      break;
    case "approval":
      // Decided (here, in another tab, or before a reload): the card's choices go.
      if (view.approval) {
        view.approval.querySelector(".choices")?.remove();
        view.approval = null;
      }
      step(view, e.allowed ? "call" : "problem", e.allowed ? "Allowed" : "Not run: needs your approval", e.line);
      break;
    case "answer_language":
      step(view, "repair", "Answer language", `asked for in ${e.language}${e.detected ? ", the question's language" : ""}`);
      break;
    case "calling_ended":
      step(view, "repair", "Calling ended", `${e.tools.join(", ")}: results already shown; the model is asked to answer`);
      break;
    case "repeat":
      step(view, "problem", "Repeated call", `${e.tool} (${e.count} times)`);
      break;
    case "degraded":
      step(view, "problem", "Tool unavailable", `${e.tool}: ${e.reason}`);
      break;
    case "warning":
      step(view, "problem", "Warning", e.message);
      break;
    case "stopped":
      finish(view, run, e);
      break;
    case "error":
      stopThinking(view, "failed");
      view.footer.className = "footer problem";
      view.footer.textContent = e.message;
      end();
      break;
    default:
      break;
  }
}

function finish(view, run, e) {
  stopThinking(view, "stopped");
  if (view.clarify) {
    // Nobody answered: the question stays, the box goes.
    const form = view.clarify.querySelector("form");
    if (form) form.remove();
    view.clarify = null;
  }
  view.answer.classList.remove("streaming");
  if (e.html) {
    view.answer.innerHTML = e.html; // sanitised by the server (ammonia)
  } else if (!e.answer) {
    view.answer.textContent = "";
  }
  const note = STOPS[e.stop_reason];
  // The run's own words say which invalid reply, which call was cut, which limit.
  const detail = DETAILED.has(e.stop_reason) ? e.message || "" : "";
  if (note) step(view, e.stop_reason === "completed" ? "ok" : "problem", note, detail);
  const t = view.tokens;
  view.footer.textContent = "";
  view.footer.appendChild(el("span", null, `${e.iterations} iteration${e.iterations === 1 ? "" : "s"}, ${seconds(e.ms)}`));
  view.footer.appendChild(el("span", null, `${t.prompt} prompt tokens (${t.cached} cached), ${t.completion} generated`));
  const link = el("a", null, "Download transcript");
  link.href = `/api/runs/${run}/transcript`;
  link.setAttribute("download", `toolloop-${run}.jsonl`);
  view.footer.appendChild(link);
  end();
}

function end() {
  if (current) {
    if (current.source) current.source.close();
    current = null;
  }
  $("stop").hidden = true;
  $("send").disabled = false;
  status("");
}

async function ensureConversation() {
  if (conversation) return conversation;
  const c = await api("POST", "/api/conversations");
  conversation = c.id;
  sessionStorage.setItem(SAVED, conversation);
  return conversation;
}

function forgetConversation() {
  conversation = null;
  sessionStorage.removeItem(SAVED);
}

// Streams a run's events into a new exchange: from its start (a reloaded page sees
// everything so far), then live until it ends.
function watch(run, events, question) {
  const view = newExchange(question);
  const source = new EventSource(events);
  current = { run, source, view };
  $("stop").hidden = false;
  $("send").disabled = true;
  status("Running…");
  source.onmessage = (m) => {
    let e;
    try { e = JSON.parse(m.data); } catch (_) { return; }
    const following = atEnd();
    handle(view, run, e);
    if (following) toEnd();
  };
  source.onerror = () => {
    // The server ends the stream after the last event; a run still going reconnects
    // by itself (EventSource resends Last-Event-ID).
    if (!current || current.run !== run) source.close();
  };
  toEnd();
}

// After a reload: the conversation the tab had, its finished runs from their
// transcripts, and the run in progress live.
async function restore() {
  if (!conversation) return;
  let c;
  try {
    c = await api("GET", `/api/conversations/${conversation}`);
  } catch (_) {
    forgetConversation(); // forgotten by the server, or the server restarted
    return;
  }
  let missing = 0;
  for (const run of c.runs) {
    let lines;
    try {
      const r = await fetch(`/api/runs/${run}/transcript`);
      if (!r.ok) { missing++; continue; }
      lines = (await r.text()).split("\n").filter((l) => l).map((l) => JSON.parse(l));
    } catch (_) { missing++; continue; }
    const question = (lines.find((e) => e.event === "run_started") || {}).query || "";
    if (run === c.running) { watch(run, `/api/runs/${run}/events`, question); continue; }
    const view = newExchange(question);
    for (const e of lines) handle(view, run, e);
  }
  if (missing) status(`${missing} earlier exchange${missing === 1 ? " is" : "s are"} no longer kept by the server.`);
  toEnd();
}

async function ask(question) {
  await ensureConversation();
  let started;
  try {
    const body = Object.keys(checkLevels).length ? { question, checks: checkLevels } : { question };
    started = await api("POST", `/api/conversations/${conversation}/runs`, body);
  } catch (e) {
    if (e.status === 404) { forgetConversation(); return ask(question); }
    throw e;
  }
  watch(started.run, started.events, question);
}

// The checks this page's runs turn on or off, by name, over the server's defaults.
const checkLevels = {};

function showChecks(checks) {
  const list = $("check-list");
  list.textContent = "";
  for (const c of checks || []) {
    const li = el("li");
    const label = el("label");
    const box = document.createElement("input");
    box.type = "checkbox";
    box.checked = c.on;
    box.addEventListener("change", () => {
      if (box.checked === c.on) delete checkLevels[c.name];
      else checkLevels[c.name] = box.checked;
    });
    label.appendChild(box);
    label.appendChild(el("code", null, c.name));
    label.appendChild(document.createTextNode(` ${c.what}`));
    li.appendChild(label);
    list.appendChild(li);
  }
}

// The first screen: a few questions the tools offered can answer, from the tools' own
// examples; without any, the tools' names.
function showWelcome(tools) {
  const list = $("suggestions");
  list.textContent = "";
  const examples = tools.flatMap((t) => (t.examples || []).slice(0, 2)).slice(0, 4);
  for (const q of examples) {
    const li = el("li");
    const b = el("button", "suggestion", q);
    b.type = "button";
    b.addEventListener("click", () => {
      $("question").value = q;
      $("ask").requestSubmit();
    });
    li.appendChild(b);
    list.appendChild(li);
  }
  $("suggest-label").textContent = examples.length
    ? "For example:"
    : tools.length ? "The model can call: " + tools.map((t) => t.name).join(", ") + "." : "No tools are connected: the model answers on its own.";
  $("welcome").hidden = $("log").children.length > 0;
}

async function loadTools() {
  try {
    const t = await api("GET", "/api/tools");
    $("model").textContent = t.model ? `model: ${t.model}` : "";
    const list = $("tool-list");
    list.textContent = "";
    if (!t.tools.length) list.appendChild(el("li", "muted", "none: the model answers on its own"));
    for (const tool of t.tools) {
      const li = el("li");
      li.appendChild(el("code", null, tool.name));
      const params = Object.keys((tool.inputSchema && tool.inputSchema.properties) || {});
      li.appendChild(document.createTextNode(`(${params.join(", ")}) ${tool.description || ""}`));
      list.appendChild(li);
    }
    $("tools-toggle").textContent = `Tools (${t.tools.length})`;
    showChecks(t.checks);
    showWelcome(t.tools);
  } catch (e) {
    status("Could not list the tools: " + e.message);
  }
}

function setup() {
  $("ask").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const q = $("question").value.trim();
    if (!q || current) return;
    $("question").value = "";
    try {
      await ask(q);
    } catch (e) {
      status(e.message);
      $("question").value = q;
    }
  });
  $("question").addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && !ev.shiftKey) {
      ev.preventDefault();
      $("ask").requestSubmit();
    }
  });
  $("stop").addEventListener("click", async () => {
    if (!current) return;
    status("Stopping…");
    try { await api("POST", `/api/runs/${current.run}/stop`); } catch (e) { status(e.message); }
  });
  $("reset").addEventListener("click", async () => {
    // The page is cleared at once; the server forgets the conversation (and stops its
    // run) behind it.
    const old = conversation;
    forgetConversation();
    end();
    $("log").textContent = "";
    $("welcome").hidden = false;
    status("Started over.");
    if (old) { try { await api("DELETE", `/api/conversations/${old}`); } catch (_) { /* gone */ } }
  });
  $("tools-toggle").addEventListener("click", () => {
    const t = $("tools");
    t.hidden = !t.hidden;
    $("tools-toggle").setAttribute("aria-expanded", String(!t.hidden));
  });
  loadTools().then(restore);
  $("question").focus();
}

document.addEventListener("DOMContentLoaded", setup);
