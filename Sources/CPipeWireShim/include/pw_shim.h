// The PipeWire gate's connection, in plain C: one manager connection to a
// PipeWire server, driven by whoever polls its descriptor. PipeWire's
// macros, inline functions and listener structs stay on this side; events
// come back through the callbacks of `earmuff_pw_events`, every string and
// property list valid only during the call.
#ifndef EARMUFF_PW_SHIM_H
#define EARMUFF_PW_SHIM_H

#include <stddef.h>
#include <stdint.h>

typedef struct earmuff_pw earmuff_pw;

/// Properties as parallel arrays of `count` keys and values.
typedef struct {
    size_t count;
    const char *const *keys;
    const char *const *values;
} earmuff_pw_props;

typedef struct {
    /// A global appeared (`type` without its "PipeWire:Interface:" prefix).
    void (*global)(void *context, uint32_t id, const char *type, const earmuff_pw_props *props);
    void (*global_removed)(void *context, uint32_t id);
    /// The full properties of a node bound with earmuff_pw_bind_node (sent again when they change).
    void (*node_info)(void *context, uint32_t id, const earmuff_pw_props *props);
    /// The format a node bound with earmuff_pw_bind_node negotiated (sent again when it
    /// changes): SPA's short name of its sample format ("S16LE", "F32P"…), channels and rate.
    /// For a JACK node's ports ("dsp"), `channels` is 0: one per port, at the graph's rate.
    void (*node_format)(void *context, uint32_t id, const char *format, uint32_t channels, uint32_t rate);
    /// A property of the bound metadata changed; `key` NULL clears every key of `subject`
    /// (every subject when `subject` is UINT32_MAX), `value` NULL removes `key`.
    void (*metadata)(void *context, uint32_t subject, const char *key, const char *type, const char *value);
    /// The node made by earmuff_pw_create_node under `tag` has this global id.
    void (*created)(void *context, uint32_t tag, uint32_t id);
    /// The server reported an error; `fatal` when the connection is gone.
    void (*error)(void *context, uint32_t id, int res, const char *message, int fatal);
    /// The server has handled every request sent before earmuff_pw_sync returned `seq`, and
    /// sent every event they caused.
    void (*synced)(void *context, int seq);
} earmuff_pw_events;

/// Initializes libpipewire once per process.
void earmuff_pw_init(void);

/// Connects to `remote` (a socket name or path; NULL: $PIPEWIRE_REMOTE, else pipewire-0) and
/// lists the registry. NULL and -errno in `error` on failure. Call every function of a
/// connection, this one included, on one thread.
earmuff_pw *earmuff_pw_connect(const char *remote, const earmuff_pw_events *events, void *context, int *error);

/// Asks the server to say (`synced`) once it has handled every request sent so far; returns
/// the sequence number it will say, or a negative errno.
int earmuff_pw_sync(earmuff_pw *pw);

/// The loop's descriptor: readable when earmuff_pw_dispatch has work.
int earmuff_pw_fd(earmuff_pw *pw);

/// Runs what is ready, without waiting. Negative errno on failure.
int earmuff_pw_dispatch(earmuff_pw *pw);

/// Binds node `id` to receive its full properties (node_info) and its negotiated format (node_format).
int earmuff_pw_bind_node(earmuff_pw *pw, uint32_t id);

/// Binds metadata `id` (one at a time) to follow and set its properties.
int earmuff_pw_bind_metadata(earmuff_pw *pw, uint32_t id);

/// Sets `key` of `subject` in the bound metadata; `value` NULL removes it.
int earmuff_pw_metadata_set(earmuff_pw *pw, uint32_t subject, const char *key, const char *type, const char *value);

/// Creates a node owned by this connection with `factory` ("adapter") and the properties given,
/// under the caller's `tag`; a node made before under the same tag is destroyed.
int earmuff_pw_create_node(earmuff_pw *pw, uint32_t tag, const char *factory, const earmuff_pw_props *props);

/// Destroys the node made under `tag` (its proxy goes, and with it the node).
int earmuff_pw_destroy_node(earmuff_pw *pw, uint32_t tag);

/// Links output port `out_port` of node `out_node` to input port `in_port` of `in_node`; the link
/// belongs to this connection (it goes when the connection does).
int earmuff_pw_create_link(earmuff_pw *pw, uint32_t out_node, uint32_t out_port, uint32_t in_node, uint32_t in_port);

/// Asks the server to destroy global `id` (a link).
int earmuff_pw_destroy(earmuff_pw *pw, uint32_t id);

/// Shows `object` to `client` again (a manager's permission update: all on it); the client's
/// registry reports it as new.
int earmuff_pw_show(earmuff_pw *pw, uint32_t client, uint32_t object);

/// Hides `object` from `client` (a manager's permission update: none on it).
int earmuff_pw_hide(earmuff_pw *pw, uint32_t client, uint32_t object);

/// Shows each of `objects` to `client` again, with what its release gave it of everything
/// ("rwxm", or with `restricted` "rx"), in one bound proxy.
int earmuff_pw_show_all(earmuff_pw *pw, uint32_t client, const uint32_t *objects, int count, int restricted);

/// Hides each of `objects` from `client`, in one bound proxy.
int earmuff_pw_hide_all(earmuff_pw *pw, uint32_t client, const uint32_t *objects, int count);

/// Lets `client` only read `object` (a manager's permission update: "r"): it sees it, and can
/// neither destroy it nor call its methods (a client's: set its permissions).
int earmuff_pw_read_only(earmuff_pw *pw, uint32_t client, uint32_t object);

/// Releases client `id` that module-access holds until a manager sets its permissions: one
/// update that gives it every object, which also ends the hold: "rwxm", what the default access
/// gives, or with `restricted` "rx", what WirePlumber gives a Flatpak app.
int earmuff_pw_release_client(earmuff_pw *pw, uint32_t id, int restricted);

/// Disconnects and frees everything.
void earmuff_pw_disconnect(earmuff_pw *pw);

#endif
