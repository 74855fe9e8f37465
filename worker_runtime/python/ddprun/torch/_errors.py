"""UsageError: a script uses ddprun.torch in a way that cannot work (it registered nothing, an
object without state_dict, called g.steps() twice, asked for a backend the quorum cannot build).
It is a SystemExit, so the interpreter prints its one line, "ddprun: ...", without a traceback and
the process exits with 1 (its agent shows the line in the failure summary), under every launcher."""


class UsageError(SystemExit):
    def __init__(self, message):
        super().__init__("ddprun: " + message)
