// GTK 4 and libadwaita for earmuff-settings (libadwaita-1.pc requires gtk4, so
// pkg-config gives the flags of both). One module for both, so that GTK's types
// are imported once.
#include <adwaita.h>
#include <glib-unix.h>
