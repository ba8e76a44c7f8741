#include "settings_shim.h"
#include <stdio.h>

gulong earmuff_connect(gpointer instance, const char *signal, void (*handler)(gpointer, gpointer), gpointer data,
                       void (*destroy)(gpointer, GClosure *)) {
    return g_signal_connect_data(instance, signal, G_CALLBACK(handler), data, destroy, 0);
}

// "notify::" handlers get the GParamSpec between the instance and the data.
typedef struct {
    void (*handler)(gpointer, gpointer);
    gpointer data;
    void (*destroy)(gpointer, GClosure *);
} NotifyClosure;

static void notify_trampoline(GObject *object, GParamSpec *pspec, gpointer data) {
    (void)pspec;
    NotifyClosure *c = data;
    c->handler(object, c->data);
}

static void notify_free(gpointer data, GClosure *closure) {
    NotifyClosure *c = data;
    if (c->destroy) c->destroy(c->data, closure);
    g_free(c);
}

gulong earmuff_connect_notify(gpointer instance, const char *property, void (*handler)(gpointer, gpointer), gpointer data,
                              void (*destroy)(gpointer, GClosure *)) {
    NotifyClosure *c = g_new(NotifyClosure, 1);
    c->handler = handler;
    c->data = data;
    c->destroy = destroy;
    char signal[128];
    snprintf(signal, sizeof signal, "notify::%s", property);
    return g_signal_connect_data(instance, signal, G_CALLBACK(notify_trampoline), c, notify_free, 0);
}

void earmuff_accessible_label(GtkWidget *widget, const char *label) {
    gtk_accessible_update_property(GTK_ACCESSIBLE(widget), GTK_ACCESSIBLE_PROPERTY_LABEL, label, -1);
}

void earmuff_accessible_description(GtkWidget *widget, const char *text) {
    gtk_accessible_update_property(GTK_ACCESSIBLE(widget), GTK_ACCESSIBLE_PROPERTY_DESCRIPTION, text, -1);
}
