"""The requests of bench/http/versus.py: one push of each protocol, what
answer counts as accepted, and the same push as a wrk Lua script.

Every push carries the same job: the string body ``BODY`` (ouqiang's body is
a string, so the other protocols get the same string as their payload), due
in ``DELAY`` seconds, a ttr of ``TTR`` seconds. ouqiang's ``/push`` and
Youzan's ``add`` name a job id, unique per push; chronoq's native put leaves
the id out (a generated one), as its users do."""

from __future__ import annotations

import json
from dataclasses import dataclass

from scripts import DONE

BODY = json.dumps({"order": 42, "kind": "close"})
DELAY = 3600  # seconds: the job never comes due during the bench
TTR = 30
_MARK = "@ID@"  # where the id goes in a body template


@dataclass(frozen=True)
class Kind:
    """One kind of request: ``push`` (ouqiang's ``/push``, on ouqiang or on
    chronoq), ``native`` (chronoq's ``POST /v1/topics/{t}/jobs``), ``youzan``
    (``POST /v1/command`` add) or ``hello`` (the hello-world's ``GET /hello``)."""

    name: str
    method: str
    label: str

    def path(self, topic: str) -> str:
        if self.name == "push":
            return "/push"
        if self.name == "native":
            return f"/v1/topics/{topic}/jobs"
        if self.name == "youzan":
            return "/v1/command"
        return "/hello"

    def template(self, topic: str) -> str | None:
        """The JSON body with ``@ID@`` where the job's id goes (None: no body)."""
        if self.name == "push":
            job = {"topic": topic, "id": _MARK, "delay": DELAY, "ttr": TTR, "body": BODY}
        elif self.name == "youzan":
            job = {"command": "add", "topic": topic, "id": _MARK, "delay": DELAY, "ttr": TTR}
            job["body"] = BODY
        elif self.name == "native":
            job = {"payload": BODY, "delay": DELAY, "ttr": TTR}
        else:
            return None
        return json.dumps(job, separators=(",", ":"))

    def body(self, topic: str, job_id: str) -> bytes | None:
        template = self.template(topic)
        return None if template is None else template.replace(_MARK, job_id).encode()

    def accepted(self, status: int, answer: bytes) -> bool:
        """Whether the answer says the job was taken (ouqiang answers 200 either way)."""
        if self.name == "push":
            return status == 200 and b'"code":0' in answer
        if self.name == "youzan":
            return status == 200 and b'"success":true' in answer
        if self.name == "native":
            return status == 201
        return status == 200

    def lua_check(self) -> str:
        """The Lua condition of a refused answer (``status``, ``body``)."""
        if self.name == "push":
            return "status ~= 200 or not body:find('\"code\":0', 1, true)"
        if self.name == "youzan":
            return "status ~= 200 or not body:find('\"success\":true', 1, true)"
        return f"status ~= {201 if self.name == 'native' else 200}"


KINDS = {
    "push": Kind("push", "POST", "/push (ouqiang protocol)"),
    "native": Kind("native", "POST", "native put POST /v1/topics/{t}/jobs"),
    "youzan": Kind("youzan", "POST", "Youzan POST /v1/command add"),
    "hello": Kind("hello", "GET", "hello-world GET /hello"),
}


def split_counts(total: int, parts: int) -> list[int]:
    """``total`` requests over ``parts`` connections, as even as can be."""
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def _lua(text: str) -> str:
    return json.dumps(text)  # a JSON string of ASCII text is a valid Lua string literal


def wrk_script(kind: Kind, topic: str, prefix: str) -> str:
    """The push of ``kind`` as a wrk script: each request a new id (``prefix``
    and a counter: wrk -t1 runs one Lua state); a refused answer counts in
    ``bad``, which makes the run fail (scripts.wrk)."""
    template = kind.template(topic)
    head, _, tail = (template or "").partition(_MARK)
    if template is None:
        make = 'wrk.format("GET", path)'
    elif _MARK in template:
        make = 'wrk.format("POST", path, headers, head .. prefix .. n .. tail)'
    else:
        make = 'wrk.format("POST", path, headers, head)'
    return f"""-- {kind.label}: a job due in {DELAY} s per request, unique ids
local path = {_lua(kind.path(topic))}
local headers = {{["Content-Type"] = "application/json"}}
local head, tail, prefix = {_lua(head)}, {_lua(tail)}, {_lua(prefix)}
local n = 0
bad = 0

function request()
  n = n + 1
  return {make}
end

function response(status, headers, body)
  if {kind.lua_check()} then bad = bad + 1 end
end
{DONE}"""
