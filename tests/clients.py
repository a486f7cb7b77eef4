"""Official clients through `toolloop proxy`: a whole loop of call, result and answer.

    python tests/clients.py MODE BASE_URL MODEL

MODE is openai, openai-stream, ollama or agents. Prints one JSON object: the calls the
client ran ("calls": [[name, arguments], ...]) and the answer it got ("answer"). Used by
tests/real_model.rs; needs the packages scripts/py-clients.sh installs.
"""

import json
import sys

QUESTION = "What is the weather in Oslo?"
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "The city"}},
            "required": ["city"],
        },
    },
}
calls = []


def get_weather(city: str) -> str:
    calls.append(["get_weather", {"city": city}])
    return f"{city}: 4°C and light rain"


def run_openai(base, model, stream):
    from openai import OpenAI

    client = OpenAI(base_url=base + "/v1", api_key="unused")
    messages = [{"role": "user", "content": QUESTION}]
    for _ in range(4):
        if stream:
            content, pending = "", {}
            for chunk in client.chat.completions.create(
                model=model, messages=messages, tools=[WEATHER], stream=True
            ):
                if not chunk.choices:
                    continue
                delta = chunk.choices[0].delta
                content += delta.content or ""
                for tc in delta.tool_calls or []:
                    slot = pending.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
                    slot["id"] = tc.id or slot["id"]
                    if tc.function:
                        slot["name"] += tc.function.name or ""
                        slot["arguments"] += tc.function.arguments or ""
            tool_calls = [
                {"id": p["id"], "type": "function",
                 "function": {"name": p["name"], "arguments": p["arguments"]}}
                for _, p in sorted(pending.items())
            ]
        else:
            reply = client.chat.completions.create(model=model, messages=messages, tools=[WEATHER])
            message = reply.choices[0].message
            content = message.content or ""
            tool_calls = [tc.model_dump() for tc in message.tool_calls or []]
        if not tool_calls:
            return content
        messages.append({"role": "assistant", "content": None, "tool_calls": tool_calls})
        for tc in tool_calls:
            args = json.loads(tc["function"]["arguments"])
            messages.append(
                {"role": "tool", "tool_call_id": tc["id"], "content": get_weather(**args)}
            )
    return None


def run_ollama(base, model):
    from ollama import Client

    client = Client(host=base)
    messages = [{"role": "user", "content": QUESTION}]
    for _ in range(4):
        reply = client.chat(model=model, messages=messages, tools=[WEATHER])
        message = reply.message
        if not message.tool_calls:
            return message.content
        messages.append(message)
        for tc in message.tool_calls:
            result = get_weather(**tc.function.arguments)
            messages.append({"role": "tool", "content": result, "tool_name": tc.function.name})
    return None


def run_agents(base, model):
    # The OpenAI Agents SDK runs its own loop: it sends the tools, runs the calls that come
    # back, sends their results and stops at an answer.
    from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool
    from agents import set_tracing_disabled
    from openai import AsyncOpenAI

    set_tracing_disabled(True)
    tool = function_tool(get_weather)
    agent = Agent(
        name="weather",
        instructions="Answer with the tools.",
        tools=[tool],
        model=OpenAIChatCompletionsModel(
            model=model, openai_client=AsyncOpenAI(base_url=base + "/v1", api_key="unused")
        ),
    )
    return Runner.run_sync(agent, QUESTION, max_turns=4).final_output


def main():
    mode, base, model = sys.argv[1:4]
    if mode == "openai":
        answer = run_openai(base, model, stream=False)
    elif mode == "openai-stream":
        answer = run_openai(base, model, stream=True)
    elif mode == "ollama":
        answer = run_ollama(base, model)
    elif mode == "agents":
        answer = run_agents(base, model)
    else:
        sys.exit(f"unknown mode {mode}")
    print(json.dumps({"calls": calls, "answer": answer}))


if __name__ == "__main__":
    main()
