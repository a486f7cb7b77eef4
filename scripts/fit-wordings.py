#!/usr/bin/env python3
"""The fit question asked in several wordings, their answers averaged (BENCHMARKS.md,
"The fit question in five wordings"; looked at for issue 27).

A 0.5B model's yes to one wording of a question carries noise of that wording's own; five
wordings written before any answer was read, each set against its own answer for no
request (as `src/checks/tool_fit.rs` sets today's wording), and averaged, may tell right
calls from needless ones better than one.

  scripts/fit-wordings.py ask PORT OUT.jsonl DATA_DIR:CALIBRATE.json ... [--only K] [--skip ROWS]
      CALIBRATE.json is `toolloop calibrate DATA_DIR --margin 0 --dry-run --json`: its
      observations say which call the model made first, its p(tool) and share at the
      name, and whether today's rule questions it (`supported`, `unsaid`). One line per
      call today's rule questions: the five wordings' answers with the request and
      without (--only K: wording K alone; --skip: not the calls ROWS already has).
  scripts/fit-wordings.py score ROWS.jsonl ... [--p-weight W] [--name-weight W]
      AUC of each score, and what each declines at a bar drawn as `toolloop calibrate`
      draws it on the everyday set's tuning half (97% of its questioned right calls kept,
      no higher than the floor that 90% of right calls like them clear).
"""
import glob
import json
import math
import os
import re
import sys
import time
import urllib.request

P_SURE = 0.99999
SYSTEM = "You judge whether a tool is needed for a request. Reply in JSON."
# Fixed before any answer was read. The first is today's (`tool_fit::question`).
WORDINGS = [
    "To reply to this request, should the assistant call the tool {name}? Answer yes or no.",
    "Does the tool {name} do what the request asks? Answer yes or no.",
    "Is the tool {name} needed to reply to this request? Answer yes or no.",
    "Would calling {name} help to reply to this request? Answer yes or no.",
    "Is this request about what the tool {name} does? Answer yes or no.",
]


def asker(port):
    url = f"http://127.0.0.1:{port}/v1/chat/completions"

    def ask(messages):
        # As toolloop asks it: the answer's schema as a grammar, the whole prompt
        # evaluated, the share read at the first token that is mostly yes or no
        # (`tool_fit::read`). A reply begun as `{"answer": "` instead read otherwise.
        body = {"model": "m", "max_tokens": 8, "temperature": 0, "logprobs": True,
                "top_logprobs": 20, "cache_prompt": False, "messages": messages,
                "response_format": {"type": "json_schema", "json_schema": {"name": "fit", "schema": {
                    "type": "object", "properties": {"answer": {"type": "string", "enum": ["yes", "no"]}},
                    "required": ["answer"]}}}}
        req = urllib.request.Request(url, json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                tokens = json.load(r)["choices"][0]["logprobs"]["content"]
        except (OSError, KeyError, IndexError, TypeError) as e:
            sys.exit(f"no probabilities from a llama-server at {url} ({e}): start one with"
                     f" scripts/real-model.sh serve qwen {port}")
        first = lambda t: t.strip().strip('"')[:1].lower()
        for t in tokens:
            alts = [(a["token"], math.exp(a["logprob"])) for a in t["top_logprobs"]]
            if t["token"] not in [a for a, _ in alts]:
                alts.append((t["token"], math.exp(t["logprob"])))
            y = sum(p for a, p in alts if first(a) == "y")
            n = sum(p for a, p in alts if first(a) == "n")
            if y + n > 0.5:
                return y / (y + n)
        return None

    return ask


def question(request, f, wording):
    return [{"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"Tool: {f['name']} — {f['description']}\nRequest: {request}\n"
             + wording.format(name=f["name"])}]


def ask_all(port, out, specs, only=None, skip=()):
    ask = asker(port)
    leaning, rows, seconds, asked = {}, [], 0.0, 0
    for spec in specs:
        folder, report = spec.split(":")
        cases = {}
        for path in glob.glob(os.path.join(folder, "BFCL_v4_*.json")):
            with open(path) as fh:
                cases.update((v["id"], v) for v in map(json.loads, fh))
        with open(report) as fh:
            obs = json.load(fh)["observations"]
        for o in obs:
            if o["id"] in skip:
                continue
            case = cases[o["id"]]
            f = next(t for t in case["function"] if t["name"] == o["tool"])
            request = case["question"][0][-1]["content"]
            yes, base = [], []
            # Only the calls today's rule questions are asked: the others go ahead.
            for k, w in enumerate(WORDINGS if not o["supported"] or o["unsaid"] else []):
                if only is not None and k != only:
                    yes.append(None)
                    base.append(None)
                    continue
                if (f["name"], k) not in leaning:
                    leaning[f["name"], k] = ask(question("", f, w))
                t0 = time.monotonic()
                yes.append(ask(question(request, f, w)))
                seconds += time.monotonic() - t0
                asked += 1
                base.append(leaning[f["name"], k])
            rows.append(dict(o, yes=yes, base=base))
            print(json.dumps(rows[-1], ensure_ascii=False), flush=True)
    with open(out, "w") as fh:
        fh.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    print(f"{asked} questions, {seconds / max(asked, 1):.2f} s each", file=sys.stderr)


def _copy_question():
    """The AUC, the groups of sets and `tool_fit::against_baseline`, as the copy
    question's script measured them: one definition for both scripts."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "copy_question", os.path.join(os.path.dirname(os.path.abspath(__file__)), "copy-question.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_shared = _copy_question()
against, auc, group = _shared.against, _shared.auc, _shared.group


def half(r):
    return "validation" if int(re.search(r"(\d+)$", r["id"]).group(1)) % 2 else "tuning"


def t_quantile(level, dof):
    """Student's t quantile by bisection on its CDF (regularised incomplete beta by
    continued fraction): `statrs` does this for `toolloop calibrate`; the script keeps to
    the standard library."""
    def betacf(a, b, x):
        qab, qap, qam, c, d = a + b, a + 1, a - 1, 1.0, 1 - (a + b) * x / (a + 1)
        d = 1 / (d if abs(d) > 1e-30 else 1e-30)
        h = d
        for m in range(1, 200):
            m2 = 2 * m
            for aa in (m * (b - m) * x / ((qam + m2) * (a + m2)),
                       -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
                d = 1 + aa * d
                d = 1 / (d if abs(d) > 1e-30 else 1e-30)
                c = 1 + aa / c
                c = c if abs(c) > 1e-30 else 1e-30
                h *= d * c
        return h

    def ibeta(a, b, x):
        if x <= 0 or x >= 1:
            return max(0.0, min(1.0, x))
        lb = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log(1 - x)
        if x < (a + 1) / (a + b + 2):
            return math.exp(lb) * betacf(a, b, x) / a
        return 1 - math.exp(lb) * betacf(b, a, 1 - x) / b

    cdf = lambda t: 1 - 0.5 * ibeta(dof / 2, 0.5, dof / (dof + t * t)) if t > 0 else 0.5 * ibeta(dof / 2, 0.5, dof / (dof + t * t))
    lo, hi = 0.0, 50.0
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if cdf(mid) < level else (lo, mid)
    return lo


def score(files, p_weight, name_weight):
    rows = []
    for f in files:
        with open(f) as fh:
            rows += [r for r in map(json.loads, fh) if r["fit"] is not None]
    extra = lambda r: p_weight * (r["p_tool"] - 1) + name_weight * (
        0.0 if r.get("p_name") is None else min(r["p_name"], 0.2) / 0.2 - 1)
    # As toolloop read it (the schema's grammar, not a begun reply): `calibrate`'s own.
    fits = {"today, recorded": lambda r: r["fit"]}
    fits |= {f"wording {k}": (lambda k: lambda r: against(r["yes"][k], r["base"][k]))(k)
            for k in range(len(WORDINGS))}
    fits["mean of five"] = lambda r: sum(against(y, b) for y, b in zip(r["yes"], r["base"])) / len(r["yes"])
    fits["mean of 1-4"] = lambda r: sum(against(y, b) for y, b in list(zip(r["yes"], r["base"]))[1:]) / 4
    fits["recorded, 1-4"] = lambda r: (r["fit"] + sum(against(y, b) for y, b in list(zip(r["yes"], r["base"]))[1:])) / 5
    def safe(f):
        def g(r):
            try:
                return f(r)
            except TypeError:  # a wording not asked of this call (--only)
                return None
        return g

    fits = {k: safe(f) for k, f in fits.items()}
    # `Thresholds::questions` with Qwen's calibrated p_sure.
    questioned = lambda r: (not r["supported"] or r["unsaid"]) and r["p_tool"] < P_SURE and bool(r["yes"])
    label = lambda r: "right" if r["needs_tool"] else "needless"

    full = all(r["yes"] and None not in r["yes"] for r in rows if (not r["supported"] or r["unsaid"]) and r["p_tool"] < P_SURE)
    if not full:
        # Rows asked one wording alone: only the scores every questioned row has.
        fits = {k: f for k, f in fits.items()
                if all(f(r) is not None for r in rows if (not r["supported"] or r["unsaid"]) and r["p_tool"] < P_SURE)}
    print("AUC, right against needless calls (today's questioned calls), tuning / validation")
    for name, s in fits.items():
        cells = []
        for g in ["own", "bfcl", "held"]:
            pair = []
            for h in ["tuning", "validation"]:
                hs = [r for r in rows if group(r) == g and half(r) == h and questioned(r)]
                pair.append(f"{auc([s(r) for r in hs if label(r) == 'right'], [s(r) for r in hs if label(r) == 'needless']):.2f}")
            cells.append(f"{g} {' / '.join(pair)}")
        print(f"  {name:14s} " + " | ".join(cells))

    print("At the bar drawn on the everyday tuning half: right kept, needless declined; tuning / validation")
    for name, s in fits.items():
        sc = lambda r: s(r) + extra(r)
        right = sorted(sc(r) for r in rows if r["id"].startswith("everyday") and half(r) == "tuning"
                       and label(r) == "right" and questioned(r))
        n = len(right)
        keep = right[int(math.floor((1 - 0.97) * n))] - 1e-3
        mean = sum(right) / n
        sd = math.sqrt(sum((x - mean) ** 2 for x in right) / (n - 1))
        floor = mean - t_quantile(0.9, n - 1) * sd * math.sqrt(1 + 1 / n)
        bar = min(keep, floor)
        out = []
        for g in ["own", "bfcl", "held"]:
            cell = []
            for h in ["tuning", "validation"]:
                hs = [r for r in rows if group(r) == g and half(r) == h]
                rs = [r for r in hs if label(r) == "right"]
                ns = [r for r in hs if label(r) == "needless"]
                dec = lambda r: questioned(r) and sc(r) < bar
                cell.append(f"{sum(not dec(r) for r in rs)}/{len(rs)} {sum(dec(r) for r in ns)}/{len(ns)}")
            out.append(f"{g} {' / '.join(cell)}")
        print(f"  {name:14s} bar {bar:.3f} (floor {floor:.3f}, n {n}): " + " | ".join(out))


if __name__ == "__main__":
    if len(sys.argv) >= 5 and sys.argv[1] == "ask":
        # --only K asks wording K alone (the others left null); --skip ROWS.jsonl leaves
        # out the calls a run before asked.
        args, only, skip = sys.argv[4:], None, set()
        if "--only" in args:
            i = args.index("--only")
            only, args = int(args[i + 1]), args[:i] + args[i + 2:]
        if "--skip" in args:
            i = args.index("--skip")
            with open(args[i + 1]) as fh:
                skip = {json.loads(l)["id"] for l in fh}
            args = args[:i] + args[i + 2:]
        ask_all(sys.argv[2], sys.argv[3], args, only, skip)
    elif len(sys.argv) >= 3 and sys.argv[1] == "score":
        args, pw, nw = sys.argv[2:], 0.2, 0.04
        for flag in ("--p-weight", "--name-weight"):
            if flag in args:
                i = args.index(flag)
                v = float(args[i + 1])
                args = args[:i] + args[i + 2:]
                pw, nw = (v, nw) if flag == "--p-weight" else (pw, v)
        score(args, pw, nw)
    else:
        sys.exit(__doc__)
