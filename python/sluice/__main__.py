"""`python -m sluice ...` and the `sluice` console script: run the sluice CLI that the package installed beside
itself (sluice/_bin/sluice, built from src/cli/ with libsluice linked in statically), with the same arguments."""

import os
import sys

CLI = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_bin", "sluice")


def main(argv=None):
    args = sys.argv[1:] if argv is None else list(argv)
    if not os.access(CLI, os.X_OK):
        sys.exit(f"sluice: the CLI is not installed beside the package ({CLI} is missing): reinstall with "
                 "`pip install ./python`")
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(CLI, ["sluice"] + args)  # the CLI replaces this process: its exit status is the command's


if __name__ == "__main__":
    main()
