import sys

from jaxkoans.authoring.check import main

sys.exit(main())
