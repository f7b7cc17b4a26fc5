#!/usr/bin/env python3
"""Writes one deploy file per lie beside liar.py (a copy of examples/mcp-keyed/aocheck-deploy.yaml
with `LIE: "<name>"`). Run: python3 gen.py"""

LIES = [
    "other-key", "other-tool", "record-tool", "retry", "assume-sent", "sent-early",
    "sent-while-held", "failed-on-error", "no-call", "empty-lookup-sent", "no-key",
    "late-resend", "late-resend-pending", "relabel-unknown", "relabel-failed", "relabel-late", "label-unmapped",
    "pending-forever", "peek-control", "replay-other-tool", "replay-other-tool-now",
]

OUTCOMES = {"sent": "success", "failed": "not_accepted", "queued": "pending",
            "sending": "pending", "unknown": "unknown"}

# Files whose lie is (also) in the deploy file: name -> (LIE, extra env, outcomes changed, drive extra)
SPECIAL = {
    "honest": ("", {}, {}, {}),
    # The retrying behaviour, with the labels of a message still in flight declared `unknown`
    # (final): the watch settles 4 s after the first read, before the retry leaves.
    "pending-as-unknown": ("retry", {"RETRY_BACKOFF": "5"}, {"queued": "unknown", "sending": "unknown"}, {}),
    # `failed` after an error, declared as meaning `unknown`.
    "failed-mapped-unknown": ("failed-on-error", {}, {"failed": "unknown"}, {}),
    "pending-forever": ("pending-forever", {}, {}, {"deadline_ms": 15000}),
}

TEMPLATE = """# A lying twin of examples/mcp-keyed for the hostile review (tests/it/deploy_mcp_liars/README.md).
# Written by gen.py: lie {file!r} (LIE={lie!r}).
version: 1
name: mcp-liar
provider: mcp
service:
  command: [python3, liar.py]
  env:
    PORT: "{{port}}"
    MCP_URL: "{{mcp.url}}"
    MESSAGES_DB: "{{store.dir}}/messages.db"
    INSTANCE: "{{instance}}"
    MCP_CALL_TIMEOUT: "3"
    LIE: "{lie}"
{extra_env}  instances: 1
  ready: {{path: /healthz, timeout_ms: 30000}}
  kill: process_group
attribution:
  idempotency_key: "msg-{{occurrence}}"
drive:
  submit:
    method: POST
    path: /messages
    body: {{message_id: "{{occurrence}}", to: "ops@example.com", text: "Release {{occurrence}} is out"}}
    accept: [200, 201, 202]
  status:
    method: GET
    path: "/messages/{{occurrence}}"
    outcome: $.state
    outcomes:
{outcomes}{drive_extra}"""


def write(file, lie, env, outcomes, drive):
    o = dict(OUTCOMES)
    o.update(outcomes)
    text = TEMPLATE.format(
        file=file, lie=lie,
        extra_env="".join(f'    {k}: "{v}"\n' for k, v in env.items()),
        outcomes="".join(f"      {k}: {v}\n" for k, v in o.items()),
        drive_extra="".join(f"  {k}: {v}\n" for k, v in drive.items()),
    )
    with open(f"{file}.yaml", "w") as f:
        f.write(text)


for lie in LIES:
    if lie not in SPECIAL:
        write(lie, lie, {}, {}, {})
for file, (lie, env, outcomes, drive) in SPECIAL.items():
    write(file, lie, env, outcomes, drive)
