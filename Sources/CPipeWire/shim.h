// libpipewire-0.3 (Debian: libpipewire-0.3-dev), the client library of the
// PipeWire gate. Only CPipeWireShim includes it: its macros and inline
// functions are wrapped there, so Swift sees plain C.
#include <pipewire/pipewire.h>
#include <pipewire/extensions/metadata.h>
