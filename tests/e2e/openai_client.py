"""Drives the official OpenAI Python SDK (openai) against a bridge's OpenAI fronts.

    .venv/bin/python openai_client.py BASE_URL API SCENARIO MODE [API SCENARIO MODE ...]

The same arguments and reports as openai_client.mjs (see there): API chat | responses | models,
SCENARIO text | tools | parallel | reasoning | custom, MODE stream | create; one report line per
job, in order (one process for many jobs: importing the SDK takes longer than a job). Streams go through
the SDK's stream helpers (`chat.completions.stream(...).get_final_completion()`,
`responses.stream(...).get_final_response()`), which assemble and check every chunk and event.
Errors are reported, not raised: the exit code is 0 unless the driver itself is broken.
"""

import json
import os
import sys

import openai

BASE_URL = sys.argv[1]
JOBS = [sys.argv[i : i + 3] for i in range(2, len(sys.argv), 3)]
if not JOBS or len(JOBS[-1]) != 3:
    sys.exit("usage: openai_client.py BASE_URL API SCENARIO MODE [API SCENARIO MODE ...]")

WEATHER = {
    "name": "get_weather",
    "description": "Get the current weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
TIME = {
    "name": "get_time",
    "description": "Get the local time in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
PROMPTS = {
    "text": "Say hello.",
    "tools": "Weather in Paris?",
    "parallel": "Weather and time in Paris?",
    "reasoning": "Think, then say hello.",
    "custom": "Do the task.",
}
APPLY_PATCH = {
    "type": "custom",
    "name": "apply_patch",
    "description": "Apply a patch to files.",
    "format": {"type": "grammar", "syntax": "lark", "definition": 'start: "*** Begin Patch" /(.|\\n)*/ "*** End Patch"'},
}

client = openai.OpenAI(
    base_url=BASE_URL,
    api_key=os.environ.get("OPENAI_API_KEY", "any"),
    max_retries=0,
    timeout=float(os.environ.get("E2E_CLIENT_TIMEOUT_MS", "30000")) / 1000,
)


def chat_params(scenario):
    p = {
        "model": "gpt-test",
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": PROMPTS[scenario]}],
    }
    if scenario == "tools":
        p["tools"] = [{"type": "function", "function": WEATHER}]
    if scenario == "parallel":
        p["tools"] = [{"type": "function", "function": f} for f in (WEATHER, TIME)]
    if scenario == "reasoning":
        p["reasoning_effort"] = "medium"
    return p


def responses_params(scenario):
    p = {
        "model": "gpt-test",
        "instructions": "Be brief.",
        "input": [{"role": "user", "content": PROMPTS[scenario]}],
        "store": False,
    }
    if scenario == "tools":
        p["tools"] = [{"type": "function", **WEATHER, "strict": False}]
    if scenario == "parallel":
        p["tools"] = [{"type": "function", **f, "strict": False} for f in (WEATHER, TIME)]
    if scenario == "reasoning":
        p["reasoning"] = {"effort": "medium"}
    if scenario == "custom":
        p["tools"] = [APPLY_PATCH]
    return p


def dump(obj):
    data = obj.model_dump(mode="json")
    if hasattr(obj, "output_text"):
        data["output_text"] = obj.output_text
    return data


def run(api, scenario, mode):
    if api == "models":
        data = [m.model_dump(mode="json") for m in client.models.list()]
        first = client.models.retrieve(data[0]["id"]).model_dump(mode="json")
        return {"data": data, "first": first}, []
    if api == "chat" and mode == "stream":
        with client.chat.completions.stream(**chat_params(scenario), stream_options={"include_usage": True}) as stream:
            chunks = sum(1 for _ in stream)
            return dump(stream.get_final_completion()), chunks
    if api == "chat":
        return dump(client.chat.completions.create(**chat_params(scenario))), 0
    if mode == "stream":
        with client.responses.stream(**responses_params(scenario)) as stream:
            events = [event.type for event in stream]
            return dump(stream.get_final_response()), events
    return dump(client.responses.create(**responses_params(scenario))), []


def report(api, scenario, mode):
    try:
        result, events = run(api, scenario, mode)
        return {"ok": True, "result": result, "events": events}
    except Exception as e:  # noqa: BLE001 - every failure is reported
        body = getattr(e, "body", None)
        error = body.get("error", body) if isinstance(body, dict) else {}
        return {
            "ok": False,
            "error": {
                "class": type(e).__name__,
                "status": getattr(e, "status_code", None),
                "message": str(getattr(e, "message", e)),
                "type": (error or {}).get("type") if isinstance(error, dict) else None,
                "code": getattr(e, "code", None),
            },
        }


for job in JOBS:
    print(json.dumps(report(*job)), flush=True)
