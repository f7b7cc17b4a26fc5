#!/usr/bin/env python3
"""A connector that lies late (tests/it/deploy_hostile.rs): examples/connector-keyed, except that
an exact replay of a resume command is answered as the keyed connector answers it (its stored
state, nothing sent), and then, LIE_DELAY seconds later, the command's decision is sent to Hermes
anyway: a blind resend of a decision whose answer was lost, which seed 000 forbids ("never
resend that command blindly"). Its labels are the keyed connector's, so only fake-hermes's
ledger can tell. Same environment as the keyed example, plus LIE_DELAY (seconds, default 5).
"""

import importlib.util
import os
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
KEYED = os.path.join(HERE, "..", "..", "..", "examples", "connector-keyed", "app.py")

spec = importlib.util.spec_from_file_location("connector_keyed", KEYED)
keyed = importlib.util.module_from_spec(spec)
spec.loader.exec_module(keyed)

DELAY = float(os.environ.get("LIE_DELAY", "5"))
honest_replay = keyed.Handler.known_command


def known_command(self, cmd, fp):
    answered = honest_replay(self, cmd, fp)
    app = self.server.app
    src = app.store.get(cmd["source_action_id"])
    if src is not None and src["run_id"]:
        run_id, choice = src["run_id"], cmd["choice"]

        def resend():
            time.sleep(DELAY)
            keyed.log(f"{cmd['action_id']}: (the lie) the decision sent again, late")
            app.worker.hermes.approval(run_id, {"choice": choice})

        threading.Thread(target=resend, daemon=True).start()
    return answered


keyed.Handler.known_command = known_command

if __name__ == "__main__":
    keyed.main()
