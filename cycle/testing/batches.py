"""The loopback server's batch endpoints: OpenAI Batch and Gemini batch mode, so that
tests drive the real SDKs' batch calls.

OpenAI: ``POST /v1/files`` (multipart, purpose batch), ``POST /v1/batches``,
``GET /v1/batches/{id}``, ``POST /v1/batches/{id}/cancel``, ``GET /v1/files/{id}/content``.
Gemini: ``POST /{version}/models/{model}:batchGenerateContent`` (inlined requests) and
``GET /{version}/batches/{id}``.

A job runs for the server's ``batch_delay`` seconds, then its calls are answered, each as
if it had been sent alone (the server's queue, responder and faults: a queued 429 becomes
that line's error). ``created`` counts the jobs made, ``polls`` the looks at them.
``enabled = False`` makes a server without batch endpoints (404, as most compatible servers
answer); ``fail_next = "reason"`` makes the next job fail as a whole.
"""

from __future__ import annotations

import email.parser
import email.policy
import itertools
import json
import re
import threading
import time
from typing import TYPE_CHECKING, Any

from msgspec import Struct, field

if TYPE_CHECKING:
    from cycle.testing.server import LoopbackServer

_OPENAI_BATCH = re.compile(r"^(?:/v1)?/batches/(?P<id>[^/]+?)(?P<cancel>/cancel)?$")
_OPENAI_FILE = re.compile(r"^(?:/v1)?/files/(?P<id>[^/]+)/content$")
_GEMINI_CREATE = re.compile(r"^/(?P<version>[^/]+)/models/(?P<model>[^/:]+):batchGenerateContent$")
_GEMINI_BATCH = re.compile(r"^/(?P<version>[^/]+)/batches/(?P<id>[^/:]+)$")

Answer = tuple[int, dict[str, str], bytes]


class Job(Struct):
    """A batch job: its calls (key, model, body) and, once it ran, their answers."""

    id: str
    api: str
    model: str
    calls: list[tuple[str, str, Any]]
    created: float
    input_file_id: str = ""
    error: str = ""
    cancelled: bool = False
    #: (key, status, body) per call, once answered
    answers: list[tuple[str, int, Any]] | None = None
    output_file_id: str = ""
    error_file_id: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)


class BatchEngine:
    """The batch jobs of one loopback server (see the module doc)."""

    def __init__(self, server: LoopbackServer, *, delay: float = 0.0) -> None:
        self.server = server
        #: seconds a job takes before its calls are answered
        self.delay = delay
        self.jobs: dict[str, Job] = {}
        self.files: dict[str, bytes] = {}
        #: jobs created, and looks at a job's state, so far
        self.created = 0
        self.polls = 0
        #: False: no batch endpoints at all (404)
        self.enabled = True
        #: the reason the next job created fails as a whole (then cleared)
        self.fail_next = ""
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def reset(self) -> None:
        """Forget jobs, files and counts; batch endpoints on again."""
        with self._lock:
            self.jobs.clear()
            self.files.clear()
            self.created = self.polls = 0
            self.enabled, self.fail_next = True, ""

    def route(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> Answer | None:
        """The answer of a batch endpoint, or None when ``path`` is not one."""
        if not self.enabled:
            return None
        if method == "POST" and path in ("/v1/files", "/files"):
            return self._upload(headers, raw)
        if method == "POST" and path in ("/v1/batches", "/batches"):
            return self._openai_create(raw)
        if (m := _OPENAI_BATCH.match(path)) and method in ("GET", "POST"):
            return self._openai_job(m.group("id"), cancel=bool(m.group("cancel")))
        if method == "GET" and (m := _OPENAI_FILE.match(path)):
            content = self.files.get(m.group("id"))
            return (200, {}, content) if content is not None else _openai_error(404, "no such file")
        if method == "POST" and (m := _GEMINI_CREATE.match(path)):
            return self._gemini_create(m.group("model"), raw)
        if method == "GET" and (m := _GEMINI_BATCH.match(path)):
            return self._gemini_job(m.group("id"))
        return None

    # -- running a job -----------------------------------------------------------------

    def _new(self, api: str, model: str, calls: list[tuple[str, str, Any]], **kw: Any) -> Job:
        with self._lock:
            self.created += 1
            if self.fail_next and not kw.get("error"):
                kw["error"], self.fail_next = self.fail_next, ""
            job = Job(id=f"batch_loopback_{next(self._ids)}", api=api, model=model,
                      calls=calls, created=time.monotonic(), **kw)
            self.jobs[job.id] = job
        return job

    def _look(self, job: Job) -> None:
        """A look at a job: once its time is up, its calls are answered."""
        with self._lock:
            self.polls += 1
            due = time.monotonic() - job.created >= self.delay
            if job.answers is not None or job.error or not (due or job.cancelled):
                return
            api = "openai" if job.api == "openai" else "gemini"
            path = "/v1/chat/completions" if api == "openai" else f"/v1beta/models/{job.model}"
            calls, job.calls = job.calls, []
        answers = [(key, *self.server.answer_in_batch(api, model, path, body))
                   for key, model, body in ([] if job.cancelled else calls)]
        with self._lock:
            job.answers = answers

    # -- OpenAI ------------------------------------------------------------------------

    def _upload(self, headers: dict[str, str], raw: bytes) -> Answer:
        kind = headers.get("content-type", "")
        message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
            f"Content-Type: {kind}\r\n\r\n".encode() + raw)
        fields: dict[str, tuple[str | None, bytes]] = {}
        for part in message.iter_parts() if message.is_multipart() else ():
            name = part.get_param("name", header="content-disposition")
            payload = part.get_payload(decode=True)
            fields[str(name)] = (part.get_filename(), payload if isinstance(payload, bytes) else b"")
        if "file" not in fields or fields.get("purpose", (None, b""))[1] != b"batch":
            return _openai_error(400, "expected a multipart upload with file and purpose=batch")
        file_id = f"file-loopback-{next(self._ids)}"
        filename, content = fields["file"]
        self.files[file_id] = content
        return _json(200, {"id": file_id, "object": "file", "bytes": len(content),
                           "created_at": int(time.time()), "filename": filename or "upload",
                           "purpose": "batch", "status": "processed"})

    def _openai_create(self, raw: bytes) -> Answer:
        try:
            body = json.loads(raw)
            content = self.files[body["input_file_id"]]
        except (ValueError, KeyError, TypeError):
            return _openai_error(400, "input_file_id names no uploaded file")
        if body.get("endpoint") != "/v1/chat/completions":
            return _openai_error(400, f"unsupported endpoint {body.get('endpoint')!r}")
        calls, error, seen = [], "", set()
        for n, line in enumerate(content.decode().splitlines(), 1):
            try:
                item = json.loads(line)
                key, request = str(item["custom_id"]), item["body"]
                if item.get("url") != "/v1/chat/completions" or key in seen:
                    raise ValueError
            except (ValueError, KeyError, TypeError):
                error = f"line {n} is not a chat completions request with a unique custom_id"
                break
            seen.add(key)
            calls.append((key, str(request.get("model", "")), request))
        job = self._new("openai", "", calls, input_file_id=body["input_file_id"], error=error,
                        metadata=dict(body.get("metadata") or {}))
        return _json(200, self._openai_view(job))

    def _openai_job(self, job_id: str, *, cancel: bool = False) -> Answer:
        job = self.jobs.get(job_id)
        if job is None or job.api != "openai":
            return _openai_error(404, f"no batch {job_id}")
        if cancel:
            job.cancelled = True
        self._look(job)
        if job.answers is not None and not job.output_file_id:
            good = [a for a in job.answers if a[1] == 200]
            bad = [a for a in job.answers if a[1] != 200]
            for kind, answers in (("output", good), ("error", bad)):
                if answers:
                    file_id = f"file-loopback-{next(self._ids)}"
                    self.files[file_id] = "".join(json.dumps({
                        "id": f"batch_req_{n}", "custom_id": key, "error": None,
                        "response": {"status_code": status, "request_id": f"req_{n}",
                                     "body": body}}) + "\n"
                        for n, (key, status, body) in enumerate(answers)).encode()
                    setattr(job, f"{kind}_file_id", file_id)
        return _json(200, self._openai_view(job))

    def _openai_view(self, job: Job) -> dict[str, Any]:
        answered = job.answers or []
        status = ("failed" if job.error else "cancelled" if job.cancelled and job.answers is not None
                  else "completed" if job.answers is not None else "in_progress")
        created = int(time.time())
        return {
            "id": job.id, "object": "batch", "endpoint": "/v1/chat/completions",
            "errors": {"object": "list", "data": [{"code": "invalid_request", "message": job.error}]}
            if job.error else None,
            "input_file_id": job.input_file_id, "completion_window": "24h", "status": status,
            "output_file_id": job.output_file_id or None, "error_file_id": job.error_file_id or None,
            "created_at": created, "in_progress_at": created, "expires_at": created + 86400,
            "completed_at": created if status == "completed" else None,
            "request_counts": {"total": len(answered) or len(job.calls),
                               "completed": sum(a[1] == 200 for a in answered),
                               "failed": sum(a[1] != 200 for a in answered)},
            "metadata": job.metadata,
        }

    # -- Gemini ------------------------------------------------------------------------

    def _gemini_create(self, model: str, raw: bytes) -> Answer:
        try:
            batch = json.loads(raw)["batch"]
            items = batch["inputConfig"]["requests"]["requests"]
            calls = [(str((i.get("metadata") or {}).get("key", n)), model, i["request"])
                     for n, i in enumerate(items)]
        except (ValueError, KeyError, TypeError):
            return _gemini_error(400, "expected batch.inputConfig.requests.requests")
        job = self._new("gemini", model, calls,
                        metadata={"displayName": batch.get("displayName", "")})
        return _json(200, self._gemini_view(job))

    def _gemini_job(self, job_id: str) -> Answer:
        job = self.jobs.get(job_id)
        if job is None or job.api != "gemini":
            return _gemini_error(404, f"no batch {job_id}")
        self._look(job)
        return _json(200, self._gemini_view(job))

    def _gemini_view(self, job: Job) -> dict[str, Any]:
        done = job.answers is not None
        meta: dict[str, Any] = {
            "@type": "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatch",
            "name": f"batches/{job.id}", "model": f"models/{job.model}",
            "displayName": job.metadata.get("displayName", ""),
            "state": "BATCH_STATE_FAILED" if job.error else
                     "BATCH_STATE_SUCCEEDED" if done else "BATCH_STATE_RUNNING",
            "createTime": "2026-01-01T00:00:00Z", "updateTime": "2026-01-01T00:00:00Z",
            "batchStats": {"requestCount": str(len(job.answers or job.calls))},
        }
        if done:
            meta["output"] = {"inlinedResponses": {"inlinedResponses": [
                {"response": body, "metadata": {"key": key}} if status == 200 else
                {"error": {"code": status, "message": _message(body)}, "metadata": {"key": key}}
                for key, status, body in job.answers or ()]}}
        if job.error:
            return {"name": f"batches/{job.id}", "metadata": meta, "done": True,
                    "error": {"code": 400, "message": job.error}}
        return {"name": f"batches/{job.id}", "metadata": meta, "done": done}


def _message(body: Any) -> str:
    error = body.get("error") if isinstance(body, dict) else None
    return str(error.get("message") if isinstance(error, dict) else error or "failed")


def _json(status: int, value: Any) -> Answer:
    return status, {}, json.dumps(value).encode()


def _openai_error(status: int, message: str) -> Answer:
    return _json(status, {"error": {"message": message, "type": "invalid_request_error",
                                    "param": None, "code": None}})


def _gemini_error(status: int, message: str) -> Answer:
    return _json(status, {"error": {"code": status, "message": message,
                                    "status": "NOT_FOUND" if status == 404 else "INVALID_ARGUMENT"}})
