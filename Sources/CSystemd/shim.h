// sd-bus from libsystemd (Debian: libsystemd-dev), the D-Bus library the
// desktop prompts use.
#include <systemd/sd-bus.h>
