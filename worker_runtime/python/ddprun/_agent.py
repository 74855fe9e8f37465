"""Whether this process was started by a ddprun agent.

The agent exports DDP_AGENT_VERSION (its version) to every worker and standby it starts; torchrun
sets no such variable, nor does a script launched by hand with `env://`. Used by the package's
calls that would otherwise talk to whatever MASTER_ADDR:MASTER_PORT names.
"""
import os
from typing import Optional

AGENT_VERSION_ENV = "DDP_AGENT_VERSION"


def agent_version() -> Optional[str]:
    """The version of the ddprun agent that started this process, or None when no ddprun agent
    did. Reads the environment on each call (a standby is handed its place after it started);
    never blocks, never raises."""
    return os.environ.get(AGENT_VERSION_ENV) or None
