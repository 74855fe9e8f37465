"""ddprun's Python package: what a training script started by ddprun uses to talk to its agent
(docs/python.md).

    import ddprun
    ddprun.report_progress(step, compute_s=...)    # progress beats: hang and straggler detection
    ddprun.publish_point(step, loss=..., samples_per_s=...)  # a point on the status page

Every Python worker that ddprun starts can import it: the agent puts the package's folder first on
the workers' PYTHONPATH. Outside ddprun (torchrun, `env://` by hand, no launcher) every call does
nothing and never raises, so one script runs under both launchers.

`import ddprun` imports neither torch nor anything else outside the standard library; the
in-place recovery lives in `ddprun.torch` (imported on its own).
"""
from ddprun.metrics import publish_point
from ddprun.progress import report_progress

# The same version as ddprun's (CMakeLists.txt project(); tests/python checks that they agree).
__version__ = "0.1.0"

__all__ = ["__version__", "publish_point", "report_progress"]
