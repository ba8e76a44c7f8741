// libpulse's simple API (Debian: libpulse-dev), with which the permission example
// records as any PulseAudio app would.
#include <pulse/simple.h>
#include <pulse/error.h>
