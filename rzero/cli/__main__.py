import sys

from rzero.cli import main

# as rzero/__main__.py: only the parent process of a `spawn` start runs the command
if __name__ == "__main__":
    sys.exit(main())
