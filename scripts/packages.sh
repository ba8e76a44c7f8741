# Shared by scripts/run, scripts/test, scripts/package, scripts/install and
# .ci/run (sourced, not run). Every Debian package the project needs is named
# here, once; scripts/check-packages checks the build's real needs (the headers
# and libraries of the C targets in Package.swift) against these lists.
#
# ensure_swift: puts /opt/swift/usr/bin on PATH when swift is not found, and
# installs the Debian packages the toolchain itself needs to build.
# ensure_packages [--no-install-recommends] PKG...: installs the missing Debian
# packages with apt-get: as root directly, otherwise through sudo (which asks
# for the person's password where it needs one); without either, names them and fails.

ensure_swift() {
    if ! command -v swift >/dev/null 2>&1 && [ -x /opt/swift/usr/bin/swift ]; then
        export PATH="/opt/swift/usr/bin:$PATH"
    fi
    command -v swift >/dev/null 2>&1 || { echo "swift not found: install a Swift 6 toolchain and put it on PATH" >&2; return 1; }
    ensure_packages --no-install-recommends "${EARMUFF_SWIFT_PACKAGES[@]}"
}

ensure_packages() {
    local opts=()
    if [ "${1:-}" = "--no-install-recommends" ]; then opts=(--no-install-recommends); shift; fi
    command -v dpkg >/dev/null 2>&1 || return 0
    local missing=() p
    for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
    [ ${#missing[@]} -eq 0 ] && return 0
    local as=()
    [ "$(id -u)" -eq 0 ] || as=(sudo DEBIAN_FRONTEND=noninteractive)
    if command -v apt-get >/dev/null 2>&1 && { [ ${#as[@]} -eq 0 ] || command -v sudo >/dev/null 2>&1; }; then
        echo "installing${as:+ with sudo}: ${missing[*]}" >&2
        export DEBIAN_FRONTEND=noninteractive
        "${as[@]}" apt-get update -q >&2
        "${as[@]}" apt-get install -y -q "${opts[@]}" "${missing[@]}" >&2
    else
        echo "missing packages; install them first: sudo apt-get install ${missing[*]}" >&2
        return 1
    fi
}

# What the Swift toolchain (not a Debian package) needs on Debian 12 to build:
# the C toolchain and headers it links against, pkg-config for the system
# libraries, and the libraries swift-build and its tools load.
EARMUFF_SWIFT_PACKAGES=(binutils gcc libc6-dev libstdc++-12-dev pkg-config libcurl4 libxml2 libsqlite3-0
                        libncurses6 libuuid1 zlib1g tzdata)
# What `swift build --product earmuff` needs (scripts/run, scripts/install):
# libsqlite3-dev (the store), libsystemd-dev (sd-bus: desktop prompts),
# libpipewire-0.3-dev and libspa-0.2-dev (the PipeWire gate, which includes
# SPA's headers itself); and libpulse-dev, which the permission API's example links.
EARMUFF_BUILD_PACKAGES=(libsqlite3-dev libsystemd-dev libpipewire-0.3-dev libspa-0.2-dev libpulse-dev)
# What the settings window (the earmuff-settings product) adds to that: GTK 4,
# libadwaita, and GLib's Unix API, which its shim includes itself.
EARMUFF_SETTINGS_BUILD_PACKAGES=(libgtk-4-dev libadwaita-1-dev libglib2.0-dev)
# The build (sd-bus from libsystemd-dev for desktop prompts), the PulseAudio
# tests (ffmpeg: one more real recorder of held streams), and the desktop prompt tests (a private dbus-daemon, python-dbusmock
# services, busctl from systemd). systemd also brings systemd-socket-activate
# and systemd-analyze (socket activation and `earmuff setup`); bubblewrap: the
# Flatpak-shaped sandbox test and `earmuff run --sandbox` (a runtime dependency
# too); xvfb and x11-utils (xprop, xdpyinfo): PulseAudio's X11 root-window
# announcement under setup, and X11 apps inside the sandbox; xdg-desktop-portal
# (its xdg-permission-store) and libglib2.0-bin (gdbus, as Flatseal writes):
# the desktop's microphone switch; dconf-service, dconf-gsettings-backend and
# gsettings-desktop-schemas (gsettings from libglib2.0-bin): GNOME's own
# microphone switch, org.gnome.desktop.privacy; xdg-dbus-proxy: the filtered bus a Flatpak app sees,
# from which the desktop answers are forged; xdg-desktop-portal-gtk, dunst, at-spi2-core
# with libatk-adaptor (the accessibility bus), python3-dogtail, xdotool and
# imagemagick: prompts on the real GTK dialog and the real dunst, clicked as a
# person clicks, and their screenshots; man-db, bash-completion, zsh and fish:
# the generated manual pages rendered and the completion scripts loaded in each
# shell; rtkit and polkitd: the audio threads made real-time by the real
# RealtimeKit on a private system bus. libgtk-4-dev and libadwaita-1-dev build
# earmuff-settings (the settings window), which the same person reads and
# clicks through GTK 4's own accessibility (python3-pyatspi comes with
# python3-dogtail). xfce4-panel (its systray plugin: the StatusNotifierWatcher
# and host, menus through libdbusmenu-gtk3) and xfconf (xfconfd, which holds
# the panel's layout, and xfconf-query): the tray indicator, its menu opened
# and clicked by the same person.
EARMUFF_PACKAGES=("${EARMUFF_BUILD_PACKAGES[@]}" "${EARMUFF_SETTINGS_BUILD_PACKAGES[@]}" pulseaudio pulseaudio-utils socat sox ffmpeg
                  dbus python3-dbusmock systemd bubblewrap xvfb x11-utils xdg-desktop-portal libglib2.0-bin xdg-dbus-proxy
                  dconf-service dconf-gsettings-backend gsettings-desktop-schemas
                  xdg-desktop-portal-gtk dunst at-spi2-core libatk-adaptor python3-dogtail xdotool imagemagick
                  xfce4-panel xfconf
                  man-db bash-completion zsh fish rtkit polkitd)
# The second end-to-end pass: PipeWire, its pulse server, the session manager,
# the SPA plugins and a private D-Bus (without recommends: no ALSA glue, rtkit);
# for the PipeWire gate's tests, native recorders: GStreamer's pipewiresrc and
# pulsesrc (one executable through both doors), and jack_rec (jackd2's example
# clients) through pipewire-jack's pw-jack; chromium: a web page's getUserMedia,
# held and promoted in front of pipewire-pulse.
EARMUFF_PIPEWIRE_PACKAGES=(pipewire pipewire-bin pipewire-pulse wireplumber libspa-0.2-modules dbus
                           gstreamer1.0-tools gstreamer1.0-pipewire gstreamer1.0-pulseaudio pipewire-jack jackd2
                           chromium)
# The Debian package (scripts/package): debhelper and dpkg-dev build it,
# lintian checks it (without recommends: no extra toolchains); its
# Build-Depends name the build lists above (scripts/check-packages).
EARMUFF_PACKAGING_PACKAGES=(debhelper dpkg-dev lintian)
# The session pass (scripts/session-check): Debian 12 root file systems built
# with mmdebstrap, booted with systemd-nspawn.
EARMUFF_SESSION_PACKAGES=(mmdebstrap systemd-container)
