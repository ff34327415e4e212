"""`python -m signup_verification.cli`: verifyctl without its console script (deploy.sh, infra, tests)."""

import sys

from . import main

sys.exit(main())
