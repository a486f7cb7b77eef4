#!/usr/bin/env python3
"""The loop a person writes without toolloop, for whole questions: the tools sent as
OpenAI `tools`, the model's `tool_calls` run, their results put back as `tool` messages,
until the model answers without a call, ten requests, or the deadline.

It is the baseline `scripts/whole-questions.sh` compares toolloop with
(`TOOLLOOP_WHOLE_NATIVE=1`), so it is written as a user would write it and no better, with
one kindness: a call the model wrote as JSON in its text (Qwen2.5-Coder writes them in
fences, which its server does not read) is taken as a call too, as `toolloop eval
--native-tools` reads it. The tools are toolloop's own (`toolloop serve-tools --demo`, over
the HTTP tool API), so both loops run the same calculator, clock and weather.

Writes what `toolloop ask --json --transcript` writes, in the fields the whole-question
script reads: the answer, the steps, the budget (requests, model and tool time) and a
transcript with a `model_request` event per request.

    scripts/native-loop.py BASE_URL MODEL TOOLS_URL QUESTION --transcript FILE
"""
import argparse
import json
import time
import urllib.error
import urllib.request


def post(url, body, timeout):
    req = urllib.request.Request(url, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=max(timeout, 0.1)) as r:
        return json.load(r)


def calls_in_text(text, names):
    """JSON objects in the text with a tool's name and its arguments, as a lenient user
    loop reads them."""
    found, i, dec = [], 0, json.JSONDecoder()
    while (i := text.find("{", i)) != -1:
        try:
            v, end = dec.raw_decode(text, i)
        except ValueError:
            i += 1
            continue
        for c in v if isinstance(v, list) else [v]:
            if isinstance(c, dict) and c.get("name") in names:
                args = c.get("arguments", c.get("parameters", {}))
                found.append((c["name"], args if isinstance(args, dict) else {}))
        i = end
    return found


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("base_url")
    ap.add_argument("model")
    ap.add_argument("tools_url")
    ap.add_argument("question")
    ap.add_argument("--transcript", required=True)
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--max-requests", type=int, default=10)
    ap.add_argument("--num-predict", type=int, default=256)
    a = ap.parse_args()

    start = time.monotonic()
    events = open(a.transcript, "w")

    def event(name, **kw):
        kw = {"event": name, **kw, "t_ms": int((time.monotonic() - start) * 1000)}
        events.write(json.dumps(kw) + "\n")

    listed = json.load(urllib.request.urlopen(a.tools_url + "/tools", timeout=10))["tools"]
    tools = [{"type": "function", "function": {"name": t["name"], "description": t["description"],
                                                "parameters": t["inputSchema"]}} for t in listed]
    names = {t["name"] for t in listed}
    messages = [{"role": "user", "content": a.question}]
    event("run_started", query=a.question, model=a.model, tools=sorted(names))
    steps, budget = [], {"model_requests": 0, "model_ms": 0, "aside_ms": 0, "tool_ms": 0, "own_ms": 0,
                         "generated": {"answer": 0}}
    answer, stop, error = None, "max_iterations", None
    for i in range(1, a.max_requests + 1):
        left = a.timeout - (time.monotonic() - start)
        if left <= 0:
            stop = "timeout"
            break
        event("model_request", iteration=i, messages=len(messages))
        asked = time.monotonic()
        try:
            v = post(a.base_url + "/chat/completions", {
                "model": a.model, "messages": messages, "tools": tools, "temperature": 0,
                "max_tokens": a.num_predict, "stream": False}, left)
        except (urllib.error.URLError, TimeoutError, OSError) as e:
            stop = "timeout" if "timed out" in str(e) else "error"
            error = f"{a.base_url}/chat/completions: {e}"
            budget["model_ms"] += int((time.monotonic() - asked) * 1000)
            break
        budget["model_ms"] += int((time.monotonic() - asked) * 1000)
        budget["model_requests"] += 1
        budget["generated"]["answer"] += v.get("usage", {}).get("completion_tokens", 0)
        m = v["choices"][0]["message"]
        text = m.get("content") or ""
        event("model_reply", text=text, tool_calls=m.get("tool_calls"))
        native = [(c["id"], c["function"]["name"], c["function"].get("arguments") or "{}")
                  for c in m.get("tool_calls") or []]
        if native:
            messages.append({"role": "assistant", "content": text, "tool_calls": m["tool_calls"]})
            calls = []
            for cid, name, args in native:
                try:
                    args = json.loads(args) if isinstance(args, str) else args
                except ValueError:
                    args = None
                calls.append((cid, name, args))
        else:
            written = calls_in_text(text, names)
            if not written:
                answer, stop = text, "completed"
                break
            # Put back as the server's own calls would be, so the chat template shows
            # the results as tool results.
            calls = [(f"call_{i}_{k}", n, args) for k, (n, args) in enumerate(written)]
            messages.append({"role": "assistant", "content": "", "tool_calls": [
                {"id": cid, "type": "function", "function": {"name": n, "arguments": json.dumps(args)}}
                for cid, n, args in calls]})
        for cid, name, args in calls:
            ran = time.monotonic()
            if args is None:
                result = {"ok": False, "error": "the arguments are not JSON"}
            else:
                try:
                    result = post(f"{a.tools_url}/tools/{name}", args, 30)
                except urllib.error.HTTPError as e:
                    result = {"ok": False, "error": e.read().decode(errors="replace")[:500]}
            budget["tool_ms"] += int((time.monotonic() - ran) * 1000)
            content = result.get("content") if result.get("ok") else "error: " + str(result.get("error"))
            content = content if isinstance(content, str) else json.dumps(content)
            event("tool_call", iteration=i, tool=name, arguments=args)
            event("tool_result", tool=name, ok=bool(result.get("ok")), observation=content)
            steps.append({"tool": name, "arguments": args, "observation": content, "ok": bool(result.get("ok"))})
            messages.append({"role": "tool", "tool_call_id": cid, "content": content})
    elapsed = int((time.monotonic() - start) * 1000)
    budget["own_ms"] = max(0, elapsed - budget["model_ms"] - budget["tool_ms"])
    event("stopped", stop_reason=stop, answer=answer, budget=budget)
    print(json.dumps({"answer": answer, "stop_reason": stop, "error": error,
                      "iterations": budget["model_requests"],
                      "steps": steps, "budget": budget}))


if __name__ == "__main__":
    main()
