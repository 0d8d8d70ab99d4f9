"""Drives the official Python SDK (anthropic) against a bridge.

    .venv/bin/python sdk_stream.py BASE_URL SCENARIO [MODE]

BASE_URL  the bridge, e.g. http://127.0.0.1:3456 (or env ANTHROPIC_BASE_URL)
SCENARIO  text | tools | thinking | web_fetch  (or env E2E_SCENARIO): which request to send
MODE      both | stream | create  (default both)

Prints one JSON object on stdout:
  {"sdk":"python","version":..,"stream":RESULT?,"create":RESULT?}
  RESULT = {"ok":true,"message":<final Message>,"events":[event types]}
         | {"ok":false,"error":{"class","status","type","message","request_id"}}
Errors are reported, not raised: the exit code is 0 unless the driver itself is broken.
"""

import json
import os
import sys

import anthropic

TOOLS = [
    {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "input_schema": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}},
            "required": ["city"],
        },
    },
    {
        "name": "get_time",
        "description": "Get the local time in a city.",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
]


def params(name):
    base = {"model": "claude-sonnet-4-6", "max_tokens": 1024}
    if name == "text":
        return {**base, "messages": [{"role": "user", "content": "Say hello."}]}
    if name == "tools":
        return {
            **base,
            "tools": TOOLS,
            "messages": [{"role": "user", "content": "What is the weather and the time in Paris?"}],
        }
    if name == "thinking":
        return {
            **base,
            "max_tokens": 4096,
            "thinking": {"type": "enabled", "budget_tokens": 2048},
            "tools": TOOLS,
            "messages": [{"role": "user", "content": "Think, then answer: weather in Paris?"}],
        }
    if name == "web_fetch":
        # The page to read (env E2E_FETCH_URL), named by the user so the fetch may open it.
        url = os.environ["E2E_FETCH_URL"]
        return {
            **base,
            "tools": [{"type": "web_fetch_20250910", "name": "web_fetch", "max_uses": 3}],
            "messages": [{"role": "user", "content": f"What is the secret number on {url} ?"}],
        }
    raise SystemExit(f"unknown scenario {name}")


def describe_error(e):
    body = getattr(e, "body", None)
    err_type = None
    if isinstance(body, dict):
        inner = body.get("error") if isinstance(body.get("error"), dict) else body
        err_type = inner.get("type")
    return {
        "class": type(e).__name__,
        "status": getattr(e, "status_code", None),
        "type": err_type,
        "message": str(e),
        "request_id": getattr(e, "request_id", None),
    }


def main():
    base_url = (sys.argv[1] if len(sys.argv) > 1 else None) or os.environ.get("ANTHROPIC_BASE_URL")
    scenario = (sys.argv[2] if len(sys.argv) > 2 else None) or os.environ.get("E2E_SCENARIO", "text")
    mode = (sys.argv[3] if len(sys.argv) > 3 else None) or os.environ.get("E2E_MODE", "both")
    timeout = float(os.environ.get("E2E_CLIENT_TIMEOUT_MS", "30000")) / 1000.0
    if not base_url:
        print("usage: sdk_stream.py BASE_URL SCENARIO [MODE]", file=sys.stderr)
        return 2

    client = anthropic.Anthropic(base_url=base_url, api_key="sk-test", max_retries=0, timeout=timeout)
    out = {"sdk": "python", "version": anthropic.__version__, "scenario": scenario}

    if mode in ("both", "stream"):
        events = []
        try:
            with client.messages.stream(**params(scenario)) as stream:
                for event in stream:
                    events.append(event.type)
                message = stream.get_final_message()
            out["stream"] = {"ok": True, "message": message.model_dump(mode="json"), "events": events}
        except Exception as e:  # noqa: BLE001 - every failure is reported to the test
            out["stream"] = {"ok": False, "error": describe_error(e), "events": events}

    if mode in ("both", "create"):
        try:
            message = client.messages.create(**params(scenario))
            out["create"] = {"ok": True, "message": message.model_dump(mode="json")}
        except Exception as e:  # noqa: BLE001
            out["create"] = {"ok": False, "error": describe_error(e)}

    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
