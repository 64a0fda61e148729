"""A module that takes long to import (trial 27b: a framework imported inside ``train``)."""

import time

time.sleep(30)
