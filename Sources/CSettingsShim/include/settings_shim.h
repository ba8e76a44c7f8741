// What is a macro or a variadic function in GTK's C API, as plain functions
// Swift can call: signal connections with typed handlers, and accessible labels.
#pragma once
#include <adwaita.h>

/// Connects a handler (`destroy` frees `data` when the connection goes) of a signal whose only arguments are the instance and the user data
/// ("clicked", "activate", "toggled", "close-request"...).
gulong earmuff_connect(gpointer instance, const char *signal, void (*handler)(gpointer instance, gpointer data),
                       gpointer data, void (*destroy)(gpointer data, GClosure *closure));

/// Connects a handler of "notify::PROPERTY".
gulong earmuff_connect_notify(gpointer instance, const char *property, void (*handler)(gpointer instance, gpointer data),
                              gpointer data, void (*destroy)(gpointer data, GClosure *closure));

/// Connects a handler of a click gesture's "released" (the press count and position left out).
gulong earmuff_connect_released(GtkGesture *gesture, void (*handler)(gpointer instance, gpointer data), gpointer data,
                                void (*destroy)(gpointer data, GClosure *closure));

/// Sets the name assistive technologies read for a widget.
void earmuff_accessible_label(GtkWidget *widget, const char *label);

/// Sets the description assistive technologies read for a widget.
void earmuff_accessible_description(GtkWidget *widget, const char *text);
