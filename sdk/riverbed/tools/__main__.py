import sys

from riverbed.tools import main

sys.exit(main())
