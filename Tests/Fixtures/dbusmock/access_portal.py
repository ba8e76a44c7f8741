'''xdg-desktop-portal backend mock: org.freedesktop.impl.portal.Access

A python-dbusmock template for the desktop side of the Access portal, for
what the backends Debian ships cannot be made to do: answer in the a(ss)
shape of xdg-desktop-portal-kde 6 (choices with a deny too), answer garbage,
or fail. (The real xdg-desktop-portal-gtk is tested as it is, clicked.)
AccessDialog stays open until the test answers it through the
org.earmuff.test.AccessMock interface, or the caller closes it with
org.freedesktop.impl.portal.Request.Close on the request handle (then it
replies 2, as the real backends do). It counts how many dialogs were ever
open at the same time.

It takes no parameters and always claims the GNOME backend's name.
'''

import dbus
import dbus.service

from dbusmock import mockobject

BUS_NAME = 'org.freedesktop.impl.portal.desktop.gnome'
MAIN_OBJ = '/org/freedesktop/portal/desktop'
MAIN_IFACE = 'org.freedesktop.impl.portal.Access'
SYSTEM_BUS = False

CONTROL_IFACE = 'org.earmuff.test.AccessMock'
REQUEST_IFACE = 'org.freedesktop.impl.portal.Request'


def load(mock, parameters):
    mock.pending = {}      # handle -> reply callback, in arrival order
    mock.dialogs = []      # (handle, title, subtitle, body, icon, choices) of every dialog
    mock.max_open = 0
    mock.closed = []       # handles closed by the caller
    mock.failing = {}      # handle -> error callback


@dbus.service.method(MAIN_IFACE, in_signature='osssssa{sv}', out_signature='ua{sv}',
                     async_callbacks=('reply', 'error'))
def AccessDialog(self, handle, app_id, parent_window, title, subtitle, body, options, reply, error):
    handle = str(handle)
    self.pending[handle] = reply
    self.failing[handle] = error
    self.max_open = max(self.max_open, len(self.pending))
    # Choices as "id=label:option/label,option/label;..." (initial value last), so a test can read them.
    choices = ';'.join('%s=%s:%s:%s' % (c[0], c[1], ','.join('%s/%s' % (o[0], o[1]) for o in c[2]), c[3])
                       for c in options.get('choices', []))
    self.dialogs.append((handle, str(title), str(subtitle), str(body), str(options.get('icon', '')), choices))
    main = self

    def close(_request, *args):
        main.closed.append(handle)
        answer = main.pending.pop(handle, None)
        if answer is not None:
            answer(dbus.UInt32(2), dbus.Dictionary({}, signature='sv'))

    if handle not in mockobject.objects:
        self.AddObject(handle, REQUEST_IFACE, {}, [])
        mockobject.objects[handle].AddMethod(REQUEST_IFACE, 'Close', '', '', close)


@dbus.service.method(CONTROL_IFACE, in_signature='us', out_signature='s')
def Answer(self, response, lifespan):
    '''Answers the oldest open dialog: 0 granted, 1 denied, 2 cancelled; a non-empty lifespan is the option
    picked in the dialog's "lifespan" choice (always, session, 1h, once).'''
    if not self.pending:
        return ''
    handle = next(iter(self.pending))
    answer = self.pending.pop(handle)
    results = {}
    if response in (0, 1) and lifespan:
        results['choices'] = dbus.Array([dbus.Struct(('lifespan', lifespan), signature='ss')], signature='(ss)')
    answer(dbus.UInt32(response), dbus.Dictionary(results, signature='sv'))
    return handle


@dbus.service.method(CONTROL_IFACE, in_signature='s', out_signature='s')
def Misbehave(self, how):
    '''Answers the oldest open dialog wrongly: "garbage" (choices of a signature no backend
    sends), "error" (an org.freedesktop.DBus.Error.Failed reply).'''
    if not self.pending:
        return ''
    handle = next(iter(self.pending))
    answer = self.pending.pop(handle)
    if how == 'error':
        self.failing[handle](dbus.exceptions.DBusException('the dialog crashed', name='org.freedesktop.DBus.Error.Failed'))
    else:
        answer(dbus.UInt32(0), dbus.Dictionary({'choices': dbus.Array(['lifespan'], signature='s')}, signature='sv'))
    return handle


@dbus.service.method(CONTROL_IFACE, in_signature='', out_signature='uuuu')
def Stats(self):
    '''Open dialogs now, the most ever open at once, dialogs shown, dialogs closed by the caller.'''
    return (len(self.pending), self.max_open, len(self.dialogs), len(self.closed))


@dbus.service.method(CONTROL_IFACE, in_signature='', out_signature='ssssss')
def LastDialog(self):
    '''Handle, title, subtitle, body, icon and choices of the latest dialog.'''
    return self.dialogs[-1] if self.dialogs else ('', '', '', '', '', '')
