"""Log lines: JSON lines carry the request context and nothing else; access lines lose their query."""

import io
import json
import logging
import subprocess
import sys

from app.observability import logs
from tests.harness import PROJECT_ROOT


def _emit(formatter: logging.Formatter, message: str, *args, context=None) -> str:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(logs.ContextFilter())
    handler.setFormatter(formatter)
    logger = logging.getLogger("memwarden.test.logs")
    logger.addHandler(handler)
    logger.propagate = False
    token = logs.bind(context) if context is not None else None
    try:
        logger.warning(message, *args)
    finally:
        if token is not None:
            logs.unbind(token)
        logger.removeHandler(handler)
    return stream.getvalue().strip()


def test_json_lines_carry_the_request_context_only_while_a_request_runs():
    context = logs.RequestContext("rid-1", {"path": "/v1/memories/mem_raw"})
    logs_token = logs.bind(context)
    logs.identify(tenant="ten_x", key_id="key_y")
    logs.unbind(logs_token)
    line = json.loads(_emit(logs.JsonFormatter(), "decided %s", "chg_1", context=context))
    assert line["message"] == "decided chg_1" and line["level"] == "warning"
    assert (line["request_id"], line["tenant"], line["key_id"]) == ("rid-1", "ten_x", "key_y")
    assert "route" not in line and "mem_raw" not in json.dumps(line)  # not routed yet: no template, never the path
    outside = json.loads(_emit(logs.JsonFormatter(), "idle"))
    assert set(outside) == {"ts", "level", "logger", "message"}


def test_text_lines_keep_the_plain_format_and_append_the_request_id():
    assert _emit(logs.TextFormatter(), "plain") == "WARNING memwarden.test.logs: plain"
    text = _emit(logs.TextFormatter(), "in a request", context=logs.RequestContext("rid-2"))
    assert text == "WARNING memwarden.test.logs: in a request [request_id=rid-2]"


def test_access_lines_drop_the_query_string():
    record = logging.LogRecord("uvicorn.access", logging.INFO, __file__, 1, '%s - "%s %s HTTP/%s" %d',
                               ("127.0.0.1:1", "GET", "/review?q=secret+words", "1.1", 200), None)
    assert logs.AccessPathOnly().filter(record)
    assert record.getMessage() == '127.0.0.1:1 - "GET /review HTTP/1.1" 200'


def test_request_ids_are_short_and_safe_or_refused():
    assert logs.safe_request_id("abc-1.2_3") == "abc-1.2_3"
    for bad in (None, "", "a" * 65, "a b", "a\nb", "ä", "<x>"):
        assert logs.safe_request_id(bad) is None


def test_an_unknown_log_format_is_refused_by_the_cli():
    done = subprocess.run([sys.executable, "-m", "app.cli", "tenant", "list"], cwd=PROJECT_ROOT,
                          env={"MEMWARDEN_LOG_FORMAT": "xml", "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "MEMWARDEN_LOG_FORMAT" in done.stderr
