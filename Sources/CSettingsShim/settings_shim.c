#include "settings_shim.h"
#include <stdio.h>

gulong earmuff_connect(gpointer instance, const char *signal, void (*handler)(gpointer, gpointer), gpointer data,
                       void (*destroy)(gpointer, GClosure *)) {
    return g_signal_connect_data(instance, signal, G_CALLBACK(handler), data, destroy, 0);
}

// Signals with arguments between the instance and the data ("notify::" has the GParamSpec,
// a click gesture's "released" the press count and position) call the plain handler
// through a closure of their own.
typedef struct {
    void (*handler)(gpointer, gpointer);
    gpointer data;
    void (*destroy)(gpointer, GClosure *);
} Closure;

static void notify_trampoline(GObject *object, GParamSpec *pspec, gpointer data) {
    (void)pspec;
    Closure *c = data;
    c->handler(object, c->data);
}

static void released_trampoline(GtkGestureClick *gesture, int n_press, double x, double y, gpointer data) {
    (void)n_press, (void)x, (void)y;
    Closure *c = data;
    c->handler(gesture, c->data);
}

static void closure_free(gpointer data, GClosure *closure) {
    Closure *c = data;
    if (c->destroy) c->destroy(c->data, closure);
    g_free(c);
}

static gulong connect_closure(gpointer instance, const char *signal, GCallback trampoline,
                              void (*handler)(gpointer, gpointer), gpointer data, void (*destroy)(gpointer, GClosure *)) {
    Closure *c = g_new(Closure, 1);
    c->handler = handler;
    c->data = data;
    c->destroy = destroy;
    return g_signal_connect_data(instance, signal, trampoline, c, closure_free, 0);
}

gulong earmuff_connect_notify(gpointer instance, const char *property, void (*handler)(gpointer, gpointer), gpointer data,
                              void (*destroy)(gpointer, GClosure *)) {
    char signal[128];
    snprintf(signal, sizeof signal, "notify::%s", property);
    return connect_closure(instance, signal, G_CALLBACK(notify_trampoline), handler, data, destroy);
}

gulong earmuff_connect_released(GtkGesture *gesture, void (*handler)(gpointer, gpointer), gpointer data,
                                void (*destroy)(gpointer, GClosure *)) {
    return connect_closure(gesture, "released", G_CALLBACK(released_trampoline), handler, data, destroy);
}

void earmuff_accessible_label(GtkWidget *widget, const char *label) {
    gtk_accessible_update_property(GTK_ACCESSIBLE(widget), GTK_ACCESSIBLE_PROPERTY_LABEL, label, -1);
}

void earmuff_accessible_description(GtkWidget *widget, const char *text) {
    gtk_accessible_update_property(GTK_ACCESSIBLE(widget), GTK_ACCESSIBLE_PROPERTY_DESCRIPTION, text, -1);
}
