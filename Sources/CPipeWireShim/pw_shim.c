#include "pw_shim.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pipewire/pipewire.h>
#include <pipewire/extensions/metadata.h>
#include <spa/debug/types.h>
#include <spa/param/audio/format-utils.h>
#include <spa/param/audio/type-info.h>

/// One bound node proxy, freed when its global goes or the connection closes.
struct bound_node {
    struct spa_list link;
    earmuff_pw *pw;
    uint32_t id;
    struct pw_proxy *proxy;
    struct spa_hook listener;
};

/// A node this connection made, under the caller's tag; it lives as long as its proxy.
struct owned_node {
    struct spa_list link;
    earmuff_pw *pw;
    uint32_t tag;
    struct pw_proxy *proxy;
    struct spa_hook listener;
};

/// A link this connection made (its proxy is kept until the connection closes).
struct owned_link {
    struct spa_list link;
    struct pw_proxy *proxy;
};

struct earmuff_pw {
    struct pw_loop *loop;
    struct pw_context *context;
    struct pw_core *core;
    struct pw_registry *registry;
    struct spa_hook core_listener;
    struct spa_hook registry_listener;
    struct pw_metadata *metadata;
    struct spa_hook metadata_listener;
    struct spa_list created;
    struct spa_list nodes;
    struct spa_list links;
    earmuff_pw_events events;
    void *context_data;
};

/// Calls `emit` with `dict` as parallel arrays (on the stack: dicts are small).
#define WITH_PROPS(dict, name, body)                                                  \
    do {                                                                              \
        size_t n_ = (dict) ? (dict)->n_items : 0;                                     \
        const char *keys_[n_ ? n_ : 1];                                               \
        const char *values_[n_ ? n_ : 1];                                             \
        for (size_t i_ = 0; i_ < n_; i_++) {                                          \
            keys_[i_] = (dict)->items[i_].key;                                        \
            values_[i_] = (dict)->items[i_].value ? (dict)->items[i_].value : "";     \
        }                                                                             \
        earmuff_pw_props name = { n_, keys_, values_ };                               \
        body;                                                                         \
    } while (0)

void earmuff_pw_init(void) {
    static int done = 0;
    if (!done) {
        pw_init(NULL, NULL);
        done = 1;
    }
}

static void on_core_error(void *data, uint32_t id, int seq, int res, const char *message) {
    (void)seq;
    earmuff_pw *pw = data;
    // A bound node with no Format yet answers the subscription's first enumeration so: not an error.
    struct bound_node *n;
    spa_list_for_each(n, &pw->nodes, link) {
        if (res == -ENOENT && pw_proxy_get_id(n->proxy) == id) return;
    }
    int fatal = id == PW_ID_CORE && res == -EPIPE;
    if (pw->events.error) pw->events.error(pw->context_data, id, res, message ? message : "", fatal);
}

static void on_core_done(void *data, uint32_t id, int seq) {
    earmuff_pw *pw = data;
    if (id == PW_ID_CORE && pw->events.synced) pw->events.synced(pw->context_data, seq);
}

static const struct pw_core_events core_events = {
    PW_VERSION_CORE_EVENTS,
    .done = on_core_done,
    .error = on_core_error,
};

static void on_global(void *data, uint32_t id, uint32_t permissions, const char *type, uint32_t version,
                      const struct spa_dict *props) {
    (void)permissions;
    (void)version;
    earmuff_pw *pw = data;
    const char *prefix = "PipeWire:Interface:";
    if (type && strncmp(type, prefix, strlen(prefix)) == 0) type += strlen(prefix);
    WITH_PROPS(props, p, pw->events.global(pw->context_data, id, type ? type : "", &p));
}

static void free_node(struct bound_node *n) {
    spa_hook_remove(&n->listener);
    spa_list_remove(&n->link);
    pw_proxy_destroy(n->proxy);
    free(n);
}

static void on_global_remove(void *data, uint32_t id) {
    earmuff_pw *pw = data;
    struct bound_node *n, *t;
    spa_list_for_each_safe(n, t, &pw->nodes, link) {
        if (n->id == id) free_node(n);
    }
    pw->events.global_removed(pw->context_data, id);
}

static const struct pw_registry_events registry_events = {
    PW_VERSION_REGISTRY_EVENTS,
    .global = on_global,
    .global_remove = on_global_remove,
};

earmuff_pw *earmuff_pw_connect(const char *remote, const earmuff_pw_events *events, void *context, int *error) {
    earmuff_pw_init();
    earmuff_pw *pw = calloc(1, sizeof *pw);
    if (!pw) {
        *error = -ENOMEM;
        return NULL;
    }
    spa_list_init(&pw->nodes);
    spa_list_init(&pw->links);
    spa_list_init(&pw->created);
    pw->events = *events;
    pw->context_data = context;
    pw->loop = pw_loop_new(NULL);
    if (!pw->loop) goto fail;
    pw->context = pw_context_new(pw->loop, pw_properties_new(PW_KEY_CONFIG_NAME, "client.conf", NULL), 0);
    if (!pw->context) goto fail;
    struct pw_properties *props = pw_properties_new(PW_KEY_APP_NAME, "earmuff", PW_KEY_CLIENT_NAME, "earmuff", NULL);
    if (remote) pw_properties_set(props, PW_KEY_REMOTE_NAME, remote);
    pw->core = pw_context_connect(pw->context, props, 0);
    if (!pw->core) goto fail;
    pw_core_add_listener(pw->core, &pw->core_listener, &core_events, pw);
    pw->registry = pw_core_get_registry(pw->core, PW_VERSION_REGISTRY, 0);
    if (!pw->registry) goto fail;
    pw_registry_add_listener(pw->registry, &pw->registry_listener, &registry_events, pw);
    return pw;
fail:
    *error = errno ? -errno : -EIO;
    earmuff_pw_disconnect(pw);
    return NULL;
}

int earmuff_pw_fd(earmuff_pw *pw) { return pw_loop_get_fd(pw->loop); }

int earmuff_pw_sync(earmuff_pw *pw) { return pw_core_sync(pw->core, PW_ID_CORE, 0); }

int earmuff_pw_dispatch(earmuff_pw *pw) {
    pw_loop_enter(pw->loop);
    int r = pw_loop_iterate(pw->loop, 0);
    pw_loop_leave(pw->loop);
    return r < 0 && r != -EINTR ? r : 0;
}

static void on_node_info(void *data, const struct pw_node_info *info) {
    struct bound_node *n = data;
    if (!(info->change_mask & PW_NODE_CHANGE_MASK_PROPS)) return;
    WITH_PROPS(info->props, p, n->pw->events.node_info(n->pw->context_data, n->id, &p));
}

static void on_node_param(void *data, int seq, uint32_t id, uint32_t index, uint32_t next, const struct spa_pod *param) {
    (void)seq;
    (void)index;
    (void)next;
    struct bound_node *n = data;
    uint32_t media_type, media_subtype;
    if (id != SPA_PARAM_Format || !param || !n->pw->events.node_format) return;
    if (spa_format_parse(param, &media_type, &media_subtype) < 0 || media_type != SPA_MEDIA_TYPE_audio) return;
    if (media_subtype == SPA_MEDIA_SUBTYPE_raw) {
        struct spa_audio_info_raw info = { 0 };
        if (spa_format_audio_raw_parse(param, &info) < 0) return;
        const char *name = spa_debug_type_find_short_name(spa_type_audio_format, info.format);
        n->pw->events.node_format(n->pw->context_data, n->id, name ? name : "", info.channels, info.rate);
    } else if (media_subtype == SPA_MEDIA_SUBTYPE_dsp) {
        struct spa_audio_info_dsp info = { 0 };
        if (spa_format_audio_dsp_parse(param, &info) < 0) return;
        const char *name = spa_debug_type_find_short_name(spa_type_audio_format, info.format);
        n->pw->events.node_format(n->pw->context_data, n->id, name ? name : "", 0, 0);
    }
}

static const struct pw_node_events node_events = {
    PW_VERSION_NODE_EVENTS,
    .info = on_node_info,
    .param = on_node_param,
};

int earmuff_pw_bind_node(earmuff_pw *pw, uint32_t id) {
    struct bound_node *n = calloc(1, sizeof *n);
    if (!n) return -ENOMEM;
    n->pw = pw;
    n->id = id;
    n->proxy = pw_registry_bind(pw->registry, id, PW_TYPE_INTERFACE_Node, PW_VERSION_NODE, 0);
    if (!n->proxy) {
        free(n);
        return -errno;
    }
    pw_node_add_listener((struct pw_node *)n->proxy, &n->listener, &node_events, n);
    // The server sends the Format param now, if there is one, and again whenever it changes.
    uint32_t params[] = { SPA_PARAM_Format };
    pw_node_subscribe_params((struct pw_node *)n->proxy, params, 1);
    spa_list_append(&pw->nodes, &n->link);
    return 0;
}

static int on_metadata_property(void *data, uint32_t subject, const char *key, const char *type, const char *value) {
    earmuff_pw *pw = data;
    pw->events.metadata(pw->context_data, subject, key, type, value);
    return 0;
}

static const struct pw_metadata_events metadata_events = {
    PW_VERSION_METADATA_EVENTS,
    .property = on_metadata_property,
};

int earmuff_pw_bind_metadata(earmuff_pw *pw, uint32_t id) {
    if (pw->metadata) return -EBUSY;
    pw->metadata = pw_registry_bind(pw->registry, id, PW_TYPE_INTERFACE_Metadata, PW_VERSION_METADATA, 0);
    if (!pw->metadata) return -errno;
    pw_metadata_add_listener(pw->metadata, &pw->metadata_listener, &metadata_events, pw);
    return 0;
}

int earmuff_pw_metadata_set(earmuff_pw *pw, uint32_t subject, const char *key, const char *type, const char *value) {
    if (!pw->metadata) return -ENOENT;
    return pw_metadata_set_property(pw->metadata, subject, key, value ? type : NULL, value);
}

static void on_created_bound(void *data, uint32_t id) {
    struct owned_node *n = data;
    n->pw->events.created(n->pw->context_data, n->tag, id);
}

static const struct pw_proxy_events created_events = {
    PW_VERSION_PROXY_EVENTS,
    .bound = on_created_bound,
};

static void free_created(struct owned_node *n) {
    spa_list_remove(&n->link);
    spa_hook_remove(&n->listener);
    pw_proxy_destroy(n->proxy);
    free(n);
}

int earmuff_pw_destroy_node(earmuff_pw *pw, uint32_t tag) {
    struct owned_node *n, *t;
    spa_list_for_each_safe(n, t, &pw->created, link) {
        if (n->tag == tag) free_created(n);
    }
    return 0;
}

int earmuff_pw_create_node(earmuff_pw *pw, uint32_t tag, const char *factory, const earmuff_pw_props *props) {
    // A node made before under this tag is gone or unwanted: its proxy makes way for the new one.
    earmuff_pw_destroy_node(pw, tag);
    struct owned_node *n = calloc(1, sizeof *n);
    if (!n) return -ENOMEM;
    struct spa_dict_item items[props->count ? props->count : 1];
    for (size_t i = 0; i < props->count; i++) items[i] = SPA_DICT_ITEM_INIT(props->keys[i], props->values[i]);
    struct spa_dict dict = SPA_DICT_INIT(items, (uint32_t)props->count);
    n->proxy = pw_core_create_object(pw->core, factory, PW_TYPE_INTERFACE_Node, PW_VERSION_NODE, &dict, 0);
    if (!n->proxy) {
        free(n);
        return -errno;
    }
    n->pw = pw;
    n->tag = tag;
    pw_proxy_add_listener(n->proxy, &n->listener, &created_events, n);
    spa_list_append(&pw->created, &n->link);
    return 0;
}

int earmuff_pw_create_link(earmuff_pw *pw, uint32_t out_node, uint32_t out_port, uint32_t in_node, uint32_t in_port) {
    struct owned_link *l = calloc(1, sizeof *l);
    if (!l) return -ENOMEM;
    char values[4][16];
    snprintf(values[0], sizeof values[0], "%u", out_node);
    snprintf(values[1], sizeof values[1], "%u", out_port);
    snprintf(values[2], sizeof values[2], "%u", in_node);
    snprintf(values[3], sizeof values[3], "%u", in_port);
    struct spa_dict_item items[] = {
        SPA_DICT_ITEM_INIT(PW_KEY_LINK_OUTPUT_NODE, values[0]),
        SPA_DICT_ITEM_INIT(PW_KEY_LINK_OUTPUT_PORT, values[1]),
        SPA_DICT_ITEM_INIT(PW_KEY_LINK_INPUT_NODE, values[2]),
        SPA_DICT_ITEM_INIT(PW_KEY_LINK_INPUT_PORT, values[3]),
        /* It stays when this connection goes: a silenced stream keeps its route through a
         * restart of the gate, and the next one adopts or destroys it. */
        SPA_DICT_ITEM_INIT(PW_KEY_OBJECT_LINGER, "true"),
    };
    struct spa_dict dict = SPA_DICT_INIT_ARRAY(items);
    l->proxy = pw_core_create_object(pw->core, "link-factory", PW_TYPE_INTERFACE_Link, PW_VERSION_LINK, &dict, 0);
    if (!l->proxy) {
        free(l);
        return -errno;
    }
    spa_list_append(&pw->links, &l->link);
    return 0;
}

int earmuff_pw_destroy(earmuff_pw *pw, uint32_t id) { return pw_registry_destroy(pw->registry, id); }

/// Sends `updates` to client `id`'s permissions, in order, through a proxy bound for it (the
/// requests are queued before the proxy's destruction, so they are sent first).
static int update_permissions(earmuff_pw *pw, uint32_t id, const struct pw_permission *updates, int count) {
    struct pw_client *client = pw_registry_bind(pw->registry, id, PW_TYPE_INTERFACE_Client, PW_VERSION_CLIENT, 0);
    if (!client) return -errno;
    int r = 0;
    for (int i = 0; i < count && r >= 0; i++) r = pw_client_update_permissions(client, 1, &updates[i]);
    pw_proxy_destroy((struct pw_proxy *)client);
    return r < 0 ? r : 0;
}

int earmuff_pw_show(earmuff_pw *pw, uint32_t client, uint32_t object) {
    return earmuff_pw_show_all(pw, client, &object, 1, 0);
}

int earmuff_pw_hide(earmuff_pw *pw, uint32_t client, uint32_t object) {
    return earmuff_pw_hide_all(pw, client, &object, 1);
}

/// Gives client `id` `permissions` on each of `objects`, in one bound proxy.
static int permit(earmuff_pw *pw, uint32_t id, const uint32_t *objects, int count, uint32_t permissions) {
    if (count <= 0) return 0;
    struct pw_permission *updates = calloc((size_t)count, sizeof *updates);
    if (!updates) return -ENOMEM;
    for (int i = 0; i < count; i++) updates[i] = PW_PERMISSION_INIT(objects[i], permissions);
    int r = update_permissions(pw, id, updates, count);
    free(updates);
    return r;
}

int earmuff_pw_show_all(earmuff_pw *pw, uint32_t client, const uint32_t *objects, int count, int restricted) {
    return permit(pw, client, objects, count, restricted ? PW_PERM_R | PW_PERM_X : PW_PERM_ALL);
}

int earmuff_pw_hide_all(earmuff_pw *pw, uint32_t client, const uint32_t *objects, int count) {
    return permit(pw, client, objects, count, 0);
}

int earmuff_pw_read_only(earmuff_pw *pw, uint32_t client, uint32_t object) {
    const struct pw_permission read = PW_PERMISSION_INIT(object, PW_PERM_R);
    return update_permissions(pw, client, &read, 1);
}

int earmuff_pw_release_client(earmuff_pw *pw, uint32_t id, int restricted) {
    const struct pw_permission all = PW_PERMISSION_INIT(PW_ID_ANY, restricted ? PW_PERM_R | PW_PERM_X : PW_PERM_ALL);
    return update_permissions(pw, id, &all, 1);
}

void earmuff_pw_disconnect(earmuff_pw *pw) {
    if (!pw) return;
    struct bound_node *n, *t;
    spa_list_for_each_safe(n, t, &pw->nodes, link) free_node(n);
    struct owned_link *l, *lt;
    spa_list_for_each_safe(l, lt, &pw->links, link) {
        spa_list_remove(&l->link);
        pw_proxy_destroy(l->proxy);
        free(l);
    }
    struct owned_node *c, *ct;
    spa_list_for_each_safe(c, ct, &pw->created, link) free_created(c);
    if (pw->metadata) {
        spa_hook_remove(&pw->metadata_listener);
        pw_proxy_destroy((struct pw_proxy *)pw->metadata);
    }
    if (pw->registry) {
        spa_hook_remove(&pw->registry_listener);
        pw_proxy_destroy((struct pw_proxy *)pw->registry);
    }
    if (pw->core) {
        spa_hook_remove(&pw->core_listener);
        pw_core_disconnect(pw->core);
    }
    if (pw->context) pw_context_destroy(pw->context);
    if (pw->loop) pw_loop_destroy(pw->loop);
    free(pw);
}
