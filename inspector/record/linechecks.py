"""GENERATED from the recording line models (inspector/record/linemodels.py) by `python -m
inspector.record.linemodels > inspector/record/linechecks.py`: whether a parsed line fits its declaration,
without pydantic (a valid recording is read without building the models). Do not edit: a test regenerates
and compares."""

# fmt: off
# ruff: noqa
from __future__ import annotations

from collections.abc import Callable


def header_ok(o: dict[str, object]) -> bool:
    return ('kind' in o and ((o['kind'] == 'header' and type(o['kind']) is str))) and ('format' in o and ((o['format'] == 'stream-inspector-recording' and type(o['format']) is str))) and ('version' in o and (type(o['version']) is int and o['version'] >= 1 and o['version'] <= 1)) and ('tool_version' not in o or (type(o['tool_version']) is str or o['tool_version'] is None)) and ('source' not in o or ((type(o['source']) is dict and all(type(k0) is str for k0 in o['source'])) or o['source'] is None)) and ('started_at' not in o or (type(o['started_at']) is str or o['started_at'] is None))


def request_ok(o: dict[str, object]) -> bool:
    return ('turn' in o and type(o['turn']) is int) and ('attempt' in o and type(o['attempt']) is int) and ('kind' in o and ((o['kind'] == 'request' and type(o['kind']) is str))) and ('t' not in o or ((type(o['t']) is float and o['t'] - o['t'] == 0.0 or type(o['t']) is int) or o['t'] is None)) and ('method' not in o or (type(o['method']) is str or o['method'] is None)) and ('url' not in o or (type(o['url']) is str or o['url'] is None)) and ('headers' not in o or ((type(o['headers']) is dict and all(type(k0) is str and type(x0) is str for k0, x0 in o['headers'].items())) or o['headers'] is None)) and ('body' not in o or True)


def response_ok(o: dict[str, object]) -> bool:
    return ('turn' in o and type(o['turn']) is int) and ('attempt' in o and type(o['attempt']) is int) and ('kind' in o and ((o['kind'] == 'response' and type(o['kind']) is str))) and ('t' not in o or ((type(o['t']) is float and o['t'] - o['t'] == 0.0 or type(o['t']) is int) or o['t'] is None)) and ('status' not in o or ((type(o['status']) is int and o['status'] >= 100 and o['status'] <= 999) or o['status'] is None)) and ('headers' not in o or ((type(o['headers']) is dict and all(type(k0) is str and type(x0) is str for k0, x0 in o['headers'].items())) or o['headers'] is None))


def read_ok(o: dict[str, object]) -> bool:
    return (("data" in o) != ("b64" in o)) and ('turn' in o and type(o['turn']) is int) and ('attempt' in o and type(o['attempt']) is int) and ('kind' in o and ((o['kind'] == 'read' and type(o['kind']) is str))) and ('t' not in o or ((type(o['t']) is float and o['t'] - o['t'] == 0.0 or type(o['t']) is int) or o['t'] is None)) and ('data' not in o or type(o['data']) is str) and ('b64' not in o or type(o['b64']) is str)


def end_ok(o: dict[str, object]) -> bool:
    return ('turn' in o and type(o['turn']) is int) and ('attempt' in o and type(o['attempt']) is int) and ('kind' in o and ((o['kind'] == 'end' and type(o['kind']) is str))) and ('t' not in o or ((type(o['t']) is float and o['t'] - o['t'] == 0.0 or type(o['t']) is int) or o['t'] is None)) and ('status' not in o or (type(o['status']) is str or o['status'] is None)) and ('reason' not in o or (type(o['reason']) is str or o['reason'] is None))


def obs_ok(o: dict[str, object]) -> bool:
    return ('kind' in o and ((o['kind'] == 'obs' and type(o['kind']) is str))) and ('type' not in o or (type(o['type']) is str or o['type'] is None)) and ('id' not in o or (type(o['id']) is str or o['id'] is None)) and ('name' not in o or (type(o['name']) is str or o['name'] is None)) and ('state' not in o or (type(o['state']) is str or o['state'] is None)) and ('safe' not in o or (type(o['safe']) is bool or o['safe'] is None)) and ('times' not in o or ((type(o['times']) is dict and all(type(k0) is str and (type(x0) is float and x0 - x0 == 0.0 or type(x0) is int) for k0, x0 in o['times'].items())) or o['times'] is None)) and ('messages' not in o or ((type(o['messages']) is list and all((type(x0) is dict and all(type(k1) is str for k1 in x0)) for x0 in o['messages'])) or o['messages'] is None)) and ('t' not in o or ((type(o['t']) is float and o['t'] - o['t'] == 0.0 or type(o['t']) is int) or o['t'] is None))


def body_ok(o: dict[str, object]) -> bool:
    return ('model' not in o or (type(o['model']) is str or o['model'] is None)) and ('messages' not in o or ((type(o['messages']) is list and all((type(x0) is dict and all(type(k1) is str for k1 in x0)) for x0 in o['messages'])) or o['messages'] is None)) and ('max_tokens' not in o or (type(o['max_tokens']) is int or o['max_tokens'] is None)) and ('system' not in o or (type(o['system']) is str or (type(o['system']) is list and all((type(x0) is dict and all(type(k1) is str for k1 in x0)) for x0 in o['system'])) or o['system'] is None)) and ('tools' not in o or ((type(o['tools']) is list and all((type(x0) is dict and all(type(k1) is str for k1 in x0)) for x0 in o['tools'])) or o['tools'] is None)) and ('stream' not in o or (type(o['stream']) is bool or o['stream'] is None))


LINE_OK: dict[str, Callable[[dict[str, object]], bool]] = {
    'header': header_ok,
    'request': request_ok,
    'response': response_ok,
    'read': read_ok,
    'end': end_ok,
    'obs': obs_ok,
    'body': body_ok,
}
