#!/usr/bin/env python3
"""The copy question, measured beside the fit question (BENCHMARKS.md, "A copy question
beside the fit question"; looked at, not built into toolloop).

For each first call a `toolloop eval --json` report recorded, the same llama-server is
asked the fit question (as `src/checks/tool_fit.rs` worded it before the thirtieth pass:
BENCHMARKS.md, "The fit question worded otherwise") with and without the
request, and, for each required argument (every argument given where none is required),
"Copy the NAME from the request", its reply begun as `{"NAME": "`; the probability of the
first token that begins the call's own value is read. Each question is evaluated whole
(`cache_prompt` off), as toolloop's fit question is.

  scripts/copy-question.py ask PORT OUT.jsonl DATA.json:REPORT.json ...
      one line per call: its label (right, needless, wrong), half, fit and copy answers
  scripts/copy-question.py score ROWS.jsonl ... [--questioned Q.jsonl]
      the AUC and the figures at the bar of BENCHMARKS.md. Q.jsonl (one
      {"id", "supported", "own", "unsaid"} per call) says which calls today's rule
      questions; BENCHMARKS.md's were read with the crate's own functions
      (`support::support`, `tool_fit::own_numbers`, `tool_fit::unsaid`), which are
      not public, so without it only the rows that question every call are given.

The reports come from the model alone: `toolloop eval DATA --decide direct --check
all=off --jobs 1 --json`.
"""
import json
import math
import re
import sys
import urllib.request


def asker(port):
    url = f"http://127.0.0.1:{port}/v1/chat/completions"

    def ask(messages, prefill):
        body = {"model": "m", "max_tokens": 1, "temperature": 0, "logprobs": True,
                "top_logprobs": 20, "cache_prompt": False,
                "messages": messages + [{"role": "assistant", "content": prefill}]}
        req = urllib.request.Request(url, json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                top = json.load(r)["choices"][0]["logprobs"]["content"][0]["top_logprobs"]
        except (OSError, KeyError, IndexError) as e:
            sys.exit(f"no probabilities from a llama-server at {url} ({e}): start one with"
                     f" scripts/real-model.sh serve qwen {port}")
        return [(t["token"], math.exp(t["logprob"])) for t in top]

    return ask


def fit_question(request, f):
    return [{"role": "system", "content": "You judge whether a tool is needed for a request. Reply in JSON."},
            {"role": "user", "content": f"Tool: {f['name']} — {f['description']}\nRequest: {request}\n"
             f"To reply to this request, should the assistant call the tool {f['name']}? Answer yes or no."}]


def yes_share(alts):
    first = lambda t: t.strip().strip('"')[:1].lower()
    y = sum(p for t, p in alts if first(t) == "y")
    n = sum(p for t, p in alts if first(t) == "n")
    return y / (y + n) if y + n > 0 else None


def copy_question(request, name):
    # No parameter description: with it the model copied the description's own example
    # ("Paris" for "Who wrote Romeo and Juliet?").
    return [{"role": "system", "content": "You copy values from requests into JSON. Reply in JSON."},
            {"role": "user", "content": f"Request: {request}\nCopy the {name} from the request. "
             "If the request does not say it, write none."}]


def value_share(alts, value):
    """The probability of the tokens that begin `value` (or are all of it and its quote)."""
    return sum(p for tok, p in alts if tok and (value.startswith(tok) or tok.startswith(value + '"')))


def ask_all(port, out, specs):
    ask = asker(port)
    leaning = {}
    rows = []
    for spec in specs:
        datafile, report = spec.split(":")
        answers = {}
        try:
            with open(datafile.replace("/BFCL_v4_", "/possible_answer/BFCL_v4_")) as fh:
                for line in fh:
                    v = json.loads(line)
                    answers[v["id"]] = {k for g in v["ground_truth"] for k in g}
        except FileNotFoundError:
            pass  # irrelevance sets have no answers: every call is needless
        with open(datafile) as fh:
            cases = {v["id"]: v for v in map(json.loads, fh)}
        with open(report) as fh:
            results = json.load(fh)["cases"]
        for c in results:
            call = c.get("call")
            case = cases[c["id"]]
            tools = {f["name"]: f for f in case["function"]}
            if not call or call["name"] not in tools:
                continue
            f, args = tools[call["name"]], call.get("arguments") or {}
            request = case["question"][0][-1]["content"]
            label = ("needless" if "irrelevance" in c["id"]
                     else "right" if f["name"] in answers.get(c["id"], set()) else "wrong")
            if f["name"] not in leaning:
                leaning[f["name"]] = yes_share(ask(fit_question("", f), '{"answer": "'))
            names = [k for k in f["parameters"].get("required", []) if k in args] or list(args)
            copies = {}
            for k in names:
                v = args[k] if isinstance(args[k], str) else json.dumps(args[k], ensure_ascii=False)
                # A value that begins with n cannot be told from "none" at its first token.
                if v and v[0].lower() != "n":
                    copies[k] = value_share(ask(copy_question(request, k), '{"' + k + '": "'), v)
            n = int(re.search(r"(\d+)$", c["id"]).group(1))
            rows.append({"id": c["id"], "half": "validation" if n % 2 else "tuning",
                         "label": label, "tool": f["name"], "args": args,
                         "yes": yes_share(ask(fit_question(request, f), '{"answer": "')),
                         "base": leaning[f["name"]], "copies": copies})
            print(json.dumps(rows[-1], ensure_ascii=False), flush=True)
    with open(out, "w") as fh:
        fh.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


def against(yes, base):
    """`tool_fit::against_baseline`."""
    logit = lambda p: math.log(min(max(p, 1e-6), 1 - 1e-6) / (1 - min(max(p, 1e-6), 1 - 1e-6)))
    return 1 / (1 + math.exp(logit(base) - logit(yes)))


def copy_of(r, how):
    v = list(r["copies"].values())
    if not v:
        return 0.5
    return {"min": min(v), "mean": sum(v) / len(v), "first": v[0]}[how]


def auc(pos, neg):
    if not pos or not neg:
        return float("nan")
    return sum((p > n) + 0.5 * (p == n) for p in pos for n in neg) / (len(pos) * len(neg))


def group(r):
    if r["id"].startswith(("everyday", "languages")):
        return "own"
    if r["id"].startswith(("irrelevance", "simple_python", "multiple")):
        return "bfcl"
    return "held"


def score(files, questioned_file):
    rows = []
    for f in files:
        with open(f) as fh:
            rows += [r for r in map(json.loads, fh) if r["yes"] is not None and r["base"] is not None]
    q = {}
    if questioned_file:
        with open(questioned_file) as fh:
            q = {o["id"]: o for o in map(json.loads, fh)}
    fit = lambda r: against(r["yes"], r["base"])
    with_copy = lambda how, w: (lambda r: fit(r) + w * (copy_of(r, how) - 0.5))

    print("AUC, right against needless calls, tuning / validation")
    for name, s in [("fit", fit), ("copy(min)", lambda r: copy_of(r, "min")),
                    ("fit + 0.1 copy(min)", with_copy("min", 0.1)),
                    ("fit + 0.1 copy(mean)", with_copy("mean", 0.1))]:
        cells = []
        for g in ["own", "bfcl", "held"]:
            pair = []
            for h in ["tuning", "validation"]:
                hs = [r for r in rows if group(r) == g and r["half"] == h]
                pair.append(f"{auc([s(r) for r in hs if r['label'] == 'right'], [s(r) for r in hs if r['label'] == 'needless']):.2f}")
            cells.append(f"{g} {' / '.join(pair)}")
        print(f"  {name:22s} " + " | ".join(cells))

    # Today's rule questions a call with no shared words nor the person's own numbers,
    # or with a value nobody said (`Thresholds::questions`, p(tool) left aside).
    todays = lambda r: (not (q[r["id"]]["supported"] or q[r["id"]]["own"])) or q[r["id"]]["unsaid"]
    rules = [("every call", lambda r: True)] + ([("today's calls", todays)] if q else [])
    print("At the bar (97% of the own set's tuning right calls questioned kept), all sets:"
          " right kept, needless declined, tuning / validation")
    for rule, asked in rules:
        for how, w in [(None, 0)] + [(h, w) for h in ["min", "mean", "first"] for w in [0.05, 0.1, 0.2]]:
            s = fit if how is None else with_copy(how, w)
            right = sorted(s(r) for r in rows if r["half"] == "tuning" and group(r) == "own"
                           and r["label"] == "right" and asked(r))
            bar = right[int(math.floor(0.03 * len(right)))] - 0.005
            out = []
            for h in ["tuning", "validation"]:
                hs = [r for r in rows if r["half"] == h]
                declined = lambda r: asked(r) and s(r) < bar
                rs, ns = [r for r in hs if r["label"] == "right"], [r for r in hs if r["label"] == "needless"]
                out.append(f"{sum(not declined(r) for r in rs)}/{len(rs)} {sum(declined(r) for r in ns)}/{len(ns)}")
            print(f"  {rule}, fit{'' if how is None else f' + {w} copy({how})'}: bar {bar:.3f}: {' | '.join(out)}")


if __name__ == "__main__":
    if len(sys.argv) >= 5 and sys.argv[1] == "ask":
        ask_all(sys.argv[2], sys.argv[3], sys.argv[4:])
    elif len(sys.argv) >= 3 and sys.argv[1] == "score":
        args = sys.argv[2:]
        qf = None
        if "--questioned" in args:
            i = args.index("--questioned")
            qf = args[i + 1]
            args = args[:i] + args[i + 2:]
        score(args, qf)
    else:
        sys.exit(__doc__)
