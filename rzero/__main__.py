import sys

from rzero.cli import main

sys.exit(main())
