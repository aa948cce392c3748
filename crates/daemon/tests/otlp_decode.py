"""Decodes an OTLP export request (protobuf on stdin) with the official Python bindings (PyPI
opentelemetry-proto) and prints what it holds as JSON, for the OTLP tests to compare with what
opentelemetry-proto's Rust types read: `logs` (the default) an ExportLogsServiceRequest's
records, fields named as in AEP-0005 §3.2; `traces` an ExportTraceServiceRequest's spans."""
import json
import sys

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest


def plain(value):
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "kvlist_value":
        return {kv.key: plain(kv.value) for kv in value.kvlist_value.values}
    if kind == "array_value":
        return [plain(v) for v in value.array_value.values]
    return getattr(value, kind)


def attributes(kvs):
    return {kv.key: plain(kv.value) for kv in kvs}


def logs(body):
    request = ExportLogsServiceRequest()
    request.ParseFromString(body)
    out = []
    for resource_logs in request.resource_logs:
        resource = attributes(resource_logs.resource.attributes)
        for scope_logs in resource_logs.scope_logs:
            for r in scope_logs.log_records:
                rec = {
                    "time_unix_nano": r.time_unix_nano,
                    "event_name": r.event_name,
                    "severity_text": r.severity_text,
                    "severity_number": r.severity_number,
                    "attributes": attributes(r.attributes),
                }
                if r.trace_id:
                    rec["trace_id"], rec["span_id"], rec["flags"] = r.trace_id.hex(), r.span_id.hex(), r.flags
                if r.HasField("body"):
                    rec["body"] = plain(r.body)
                out.append({"resource": resource, "scope": scope_logs.scope.name, "record": rec})
    return out


def traces(body):
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    out = []
    for resource_spans in request.resource_spans:
        resource = attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for s in scope_spans.spans:
                out.append({
                    "resource": resource,
                    "scope": scope_spans.scope.name,
                    "trace_id": s.trace_id.hex(),
                    "span_id": s.span_id.hex(),
                    "parent_span_id": s.parent_span_id.hex(),
                    "name": s.name,
                    "kind": s.kind,
                    "start": s.start_time_unix_nano,
                    "end": s.end_time_unix_nano,
                    "status": {"code": s.status.code, "message": s.status.message},
                    "attributes": attributes(s.attributes),
                    "events": [e.name for e in s.events],
                })
    return out


signal = sys.argv[1] if len(sys.argv) > 1 else "logs"
json.dump({"logs": logs, "traces": traces}[signal](sys.stdin.buffer.read()), sys.stdout)
