"""The project of docs/tutorials/your-own-model.md, read from the page: its files and its
commands (so the page and the tests that run it cannot drift apart)."""

import re

from tests.helpers import REPO

SECTION = (REPO / "docs" / "tutorials" / "your-own-model.md").read_text()
HEADER = re.compile(r"(?:# @package \S+\n)?# (\S+?\.(?:py|yaml))\b")  # @package first, for Hydra
FILES = {
    HEADER.match(block).group(1): block
    for block in re.findall(r"```(?:py|yaml)\n(.*?)```", SECTION, flags=re.S)
    if HEADER.match(block)
}
COMMANDS = [
    line.split("  #")[0].strip()
    for block in re.findall(r"```bash\n(.*?)```", SECTION, flags=re.S)
    for line in block.splitlines()
    if line.strip()
]

KILL = '''
import os
import signal

import keras


class KillAtEpoch(keras.callbacks.Callback):
    """SIGKILL this process at the end of epoch $KILL_AT_EPOCH (a crash, for the resume test)."""

    def on_epoch_end(self, epoch, logs=None):
        if os.environ.get("KILL_AT_EPOCH") == str(epoch + 1):
            os.kill(os.getpid(), signal.SIGKILL)
'''
