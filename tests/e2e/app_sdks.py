"""Python app libraries against a bridge (issue 33): litellm's `anthropic/...` structured output
(the structured-outputs beta's top-level `output_format`).

    python app_sdks.py BRIDGE_URL litellm-structured

Prints one JSON object on stdout: {"ok": true, ...} or {"ok": false, "error": {...}}; exit code 0
unless the driver itself is broken.
"""

import json
import sys

import litellm

PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
    "additionalProperties": False,
}


def litellm_structured(base_url):
    response = litellm.completion(
        model="anthropic/claude-sonnet-4-5",
        api_base=base_url,
        api_key="any",
        max_tokens=256,
        num_retries=0,
        messages=[{"role": "user", "content": "Describe Ada Lovelace as JSON."}],
        response_format={
            "type": "json_schema",
            "json_schema": {"name": "person", "schema": PERSON, "strict": True},
        },
    )
    content = response.choices[0].message.content
    return {"ok": True, "content": content, "parsed": json.loads(content)}


def main():
    base_url, scenario = sys.argv[1], sys.argv[2]
    try:
        result = {"litellm-structured": litellm_structured}[scenario](base_url)
    except Exception as e:  # reported, not raised: the test reads the report
        result = {"ok": False, "error": {"class": type(e).__name__, "message": str(e)}}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
