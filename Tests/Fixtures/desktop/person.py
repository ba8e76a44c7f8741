#!/usr/bin/python3
'''Acts as the person at the test desktop: reads what a dialog or notification
shows and answers it with the pointer, as a person does.

  person.py dialog TEXT          waits for the portal dialog showing TEXT; prints
                                 its labels, radio buttons and buttons, one per
                                 line, then "geometry: WxH+X+Y" of its window
  person.py dialog TEXT gone     waits until no dialog shows TEXT
  person.py click NAME           pointer click (XTEST) in the middle of the
                                 dialog's radio button or button called NAME;
                                 prints "clicked at SECONDS" (since 1970)
  person.py notification-shown   waits until dunst shows a notification; prints
                                 "geometry: WxH+X+Y" of its window
  person.py notification         middle-clicks dunst's notification, which opens
                                 dunst's menu of the notification's actions
  person.py notification close   left-clicks it, which closes it unanswered
  person.py settings show TEXT   waits for Earmuff Settings showing TEXT (in any
                                 line below); prints every named widget
                                 showing, "ROLE: NAME" one per line (with
                                 " [on]" for a switch or toggle that is on), then
                                 "geometry: WxH+X+Y" of its window
  person.py settings click NAME  raises the window and clicks the pointer in
                                 the middle of its button, toggle button,
                                 switch or page tab whose accessible name is
                                 NAME; prints "clicked at SECONDS"
  person.py settings resize W H  makes the window W x H pixels, as a person drags it
  person.py settings row TITLE   prints the names in the row of app TITLE
  person.py settings fits        checks that every label and control of the page
                                 shown, and the header's switch, lies across the
                                 window within its width, and that no label is
                                 squeezed into a column (more than three times as
                                 tall as wide); prints "checked N" and a "cut off:
                                 ROLE: NAME at X..X+W of WIDTH" or "squeezed: label:
                                 NAME into WxH" line for each that is not so
  person.py settings wait TITLE TEXT [gone]
                                 waits until the row of app TITLE shows TEXT
                                 (with "gone": no longer shows it); prints
                                 "after SECONDS" it waited

Widgets are found through the accessibility tree (AT-SPI, as screen readers and
dogtail see them), which gives their place on the screen; the click itself is
a real pointer event. Exits 1 with a message when what it waits for does not
come within 60 s.
'''
import ctypes
import subprocess
import sys
import time

from dogtail.config import config
config.checkForA11y = False
config.logDebugToFile = False
config.logDebugToStdOut = False
config.searchShowingOnly = True
from dogtail import tree  # noqa: E402
import pyatspi  # noqa: E402

APP = 'xdg-desktop-portal-gtk'
ROLES = ('label', 'radio button', 'push button', 'check box')
DEADLINE = time.monotonic() + 60


def application(name):
    '''The accessible application called NAME, or None while it is not there.'''
    try:
        return tree.root.application(name, retry=False)
    except Exception:
        return None


def widgets():
    app = application(APP)
    if app is None:
        return []
    found = []

    def walk(node):
        try:
            children = node.children
        except Exception:
            return
        for c in children:
            if c.roleName in ROLES and c.showing:
                found.append(c)
            walk(c)
    walk(app)
    return found


def wait_for(predicate, what):
    while time.monotonic() < DEADLINE:
        try:
            result = predicate()
        except Exception as e:  # a widget went away while it was read: read again
            print('(retrying: %s)' % e, file=sys.stderr)
            result = None
        if result:
            return result
        time.sleep(0.1)
    sys.exit('%s did not appear within 60 s' % (what() if callable(what) else what))


def click(x, y, button=1):
    '''Moves the pointer there (xdotool) and clicks, pressing and releasing the button
    through XTEST as xdotool does, from this process so that the time is exact; prints the
    wall-clock time of the click: just before the release (what a button or a switch acts
    on) was sent, which the X server has taken in within the millisecond after.'''
    subprocess.run(['xdotool', 'mousemove', '--sync', str(x), str(y)], check=True)
    x11 = ctypes.CDLL('libX11.so.6')
    xtst = ctypes.CDLL('libXtst.so.6')
    x11.XOpenDisplay.restype = ctypes.c_void_p
    x11.XOpenDisplay.argtypes = [ctypes.c_char_p]
    x11.XSync.argtypes = [ctypes.c_void_p, ctypes.c_int]
    x11.XCloseDisplay.argtypes = [ctypes.c_void_p]
    xtst.XTestFakeButtonEvent.argtypes = [ctypes.c_void_p, ctypes.c_uint, ctypes.c_int, ctypes.c_ulong]
    display = x11.XOpenDisplay(None)
    if not display:
        sys.exit('cannot open the X display')
    xtst.XTestFakeButtonEvent(display, button, 1, 0)
    x11.XSync(display, 0)
    time.sleep(0.05)  # held down a moment, as a person's click is
    at = time.time()
    xtst.XTestFakeButtonEvent(display, button, 0, 0)
    x11.XSync(display, 0)
    x11.XCloseDisplay(display)
    print('clicked at %.6f' % at)


SETTINGS = 'earmuff-settings'
CLICKABLE = ('push button', 'toggle button', 'check box', 'switch', 'page tab')


def settings_tree():
    '''The nodes of the settings window on screen, as (node, parent index) in tree order.'''
    app = application(SETTINGS)
    if app is None:
        return []
    found = []
    try:
        width, height = app.children[0].size
    except Exception:
        return []

    def walk(node, parent):
        try:
            children = node.children
        except Exception:
            return
        for c in children:
            try:
                (x, y), (w, h) = c.position, c.size
            except Exception:
                continue
            # GTK 4.8 sets no "showing" state: what is not on screen (another page, the
            # wide switcher a squeezer hides) has no size, is wider than the window, or
            # lies above or below it.
            if w <= 0 or h <= 0 or x < -2 or x + w > width + 2 or y + h <= 0 or y >= height:
                continue
            if c.roleName != 'page tab' and c.name in hidden_pages:
                continue
            found.append((c, parent))
            walk(c, len(found) - 1)
    # GTK keeps the size of a page once shown, so the pages (named as their tabs) other
    # than the selected tab's are left out by name.
    hidden_pages = set()
    walk(app, -1)
    tabs = [n for n, _ in found if n.roleName == 'page tab']
    selected = [n.name for n in tabs if n.getState().contains(pyatspi.STATE_SELECTED)]
    if not selected:
        return found
    hidden_pages = set(n.name for n in tabs) - set(selected)
    found = []
    walk(app, -1)
    return found


FITTED = ('label', 'push button', 'toggle button', 'check box', 'switch', 'icon', 'image')


def fits():
    '''(window width, how many nodes were checked, a line per node cut off) for the labels
    and controls under the page of the selected tab, and the header's switch: on screen
    (a size) but reaching past the window's left or right edge.'''
    shown = wait_for(lambda: [n for n, _ in settings_tree() if n.roleName == 'page tab'
                              and n.getState().contains(pyatspi.STATE_SELECTED)], 'a selected page tab')
    page_name = shown[0].name
    app = application(SETTINGS)
    width = app.children[0].size[0]
    checked, cut = 0, []

    def check(node):
        nonlocal checked
        (x, _), (w, h) = node.position, node.size
        if w <= 0 or h <= 0:
            return
        checked += 1
        if x < 0 or x + w > width:
            cut.append('cut off: %s: %s at %d..%d of %d' % (node.roleName, node.name.replace('\n', ' | '), x, x + w, width))
        elif node.roleName == 'label' and h > 60 and h > 3 * w:
            cut.append('squeezed: label: %s into %dx%d' % (node.name.replace('\n', ' | '), w, h))

    def walk(node, inside):
        try:
            children = node.children
        except Exception:
            return
        for c in children:
            here = inside or (c.name == page_name and c.roleName not in ('page tab', 'label'))
            if (here and c.roleName in FITTED) or (c.roleName in ('check box', 'switch') and c.name.endswith(' access')):
                check(c)
            walk(c, here)
    walk(app, False)
    return width, checked, cut


def describe(node):
    '''"ROLE: NAME", and " [on]" for a switch or toggle button that is on.'''
    line = '%s: %s' % (node.roleName, node.name.replace('\n', ' | '))
    states = node.getState()
    if states.contains(pyatspi.STATE_CHECKED) or states.contains(pyatspi.STATE_PRESSED):
        line += ' [on]'
    return line


def settings_window():
    out = subprocess.run(['xdotool', 'search', '--onlyvisible', '--name', '^Earmuff Settings$'],
                         capture_output=True, text=True).stdout.split()
    if not out:
        return None
    geometry = subprocess.run(['xdotool', 'getwindowgeometry', '--shell', out[0]],
                              capture_output=True, text=True, check=True).stdout
    return dict(line.split('=') for line in geometry.split())


def row_names(nodes, title):
    '''The names under the row whose title label is TITLE: the nearest ancestor of the
    label that also holds the app's Allow button.'''
    for i, (n, parent) in enumerate(nodes):
        if n.roleName != 'label' or n.name != title:
            continue
        while parent >= 0:
            inside = [j for j in range(parent + 1, len(nodes)) if is_under(nodes, j, parent)]
            names = [nodes[j][0].name for j in inside]
            if 'Allow ' + title in names:
                return names
            parent = nodes[parent][1]
    return None


def is_under(nodes, j, ancestor):
    p = nodes[j][1]
    while p > ancestor:
        p = nodes[p][1]
    return p == ancestor


def settings(argv):
    if len(argv) == 2 and argv[0] == 'show':
        seen = []

        def showing():
            seen[:] = [describe(n) for n, _ in settings_tree() if n.name]
            return seen if any(argv[1] in line for line in seen) else None
        lines = wait_for(showing, lambda: 'the settings window showing %r (it shows: %s)' % (argv[1], '; '.join(seen)))
        for line in lines:
            print(line)
        g = settings_window()
        print('geometry: %sx%s+%s+%s' % (g['WIDTH'], g['HEIGHT'], g['X'], g['Y']))
    elif len(argv) == 2 and argv[0] == 'click':
        target = wait_for(lambda: next((n for n, _ in settings_tree() if n.name == argv[1] and n.roleName in CLICKABLE),
                                       None), 'a control %r in the settings window' % argv[1])
        g = settings_window()
        (x, y), (w, h) = target.position, target.size
        # In front first, as a person brings the window they click (a desktop dialog may lie over it).
        subprocess.run(['xdotool', 'windowraise', g['WINDOW']], check=True)
        # GTK 4 reports positions within its window (it has no screen coordinates on X11).
        click(int(g['X']) + x + w // 2, int(g['Y']) + y + h // 2)
    elif len(argv) == 3 and argv[0] == 'resize':
        win = wait_for(lambda: subprocess.run(['xdotool', 'search', '--onlyvisible', '--name', '^Earmuff Settings$'],
                                              capture_output=True, text=True).stdout.split(), 'the settings window')[0]
        subprocess.run(['xdotool', 'windowsize', '--sync', win, argv[1], argv[2]], check=True)
        wait_for(lambda: (lambda g: g if (g['WIDTH'], g['HEIGHT']) == (argv[1], argv[2]) else None)(settings_window()),
                 'the window at %sx%s' % (argv[1], argv[2]))
    elif argv == ['fits']:
        width, checked, cut = fits()
        print('checked %d' % checked)
        for line in cut:
            print(line)
    elif len(argv) == 2 and argv[0] == 'row':
        names = wait_for(lambda: row_names(settings_tree(), argv[1]), 'the row of %r' % argv[1])
        for name in names:
            if name:
                print(name.replace('\n', ' | '))
    elif len(argv) in (3, 4) and argv[0] == 'wait' and argv[3:] in ([], ['gone']):
        start = time.monotonic()
        gone = argv[3:] == ['gone']

        last = []

        def done():
            names = row_names(settings_tree(), argv[1])
            if names is None:
                return None
            last[:] = names
            shows = any(argv[2] in name for name in names)
            return True if shows != gone else None
        wait_for(done, lambda: 'the row of %r %s %r (it shows: %s)'
                 % (argv[1], 'without' if gone else 'showing', argv[2], ' / '.join(last)))
        print('after %.3f' % (time.monotonic() - start))
    else:
        sys.exit(__doc__)


def main(argv):
    if len(argv) >= 2 and argv[1] == 'settings':
        return settings(argv[2:])
    if len(argv) == 3 and argv[1] == 'dialog':
        text = argv[2]
        def showing():
            ws = widgets()
            return ws if any(text in w.name for w in ws) else None
        found = wait_for(showing, 'a dialog showing %r' % text)
        for w in found:
            print('%s: %s' % (w.roleName, w.name))
        window = tree.root.application(APP, retry=False).children[-1]
        (x, y), (w, h) = window.position, window.size
        print('geometry: %dx%d+%d+%d' % (w, h, x, y))
    elif len(argv) == 4 and argv[1] == 'dialog' and argv[3] == 'gone':
        wait_for(lambda: not any(argv[2] in w.name for w in widgets()), 'the end of the dialog showing %r' % argv[2])
    elif len(argv) == 3 and argv[1] == 'click':
        name = argv[2]
        target = wait_for(lambda: next((w for w in widgets()
                                        if w.name == name and w.roleName in ('radio button', 'push button')), None),
                          'a button %r' % name)
        (x, y), (w, h) = target.position, target.size
        click(x + w // 2, y + h // 2)
    elif argv[1:] in (['notification-shown'], ['notification'], ['notification', 'close']):
        def window():
            out = subprocess.run(['xdotool', 'search', '--onlyvisible', '--class', 'Dunst'],
                                 capture_output=True, text=True).stdout.split()
            return out[0] if out else None
        win = wait_for(window, "dunst's notification window")
        geometry = subprocess.run(['xdotool', 'getwindowgeometry', '--shell', win],
                                  capture_output=True, text=True, check=True).stdout
        g = dict(line.split('=') for line in geometry.split())
        if len(argv) == 2 and argv[1] == 'notification-shown':
            print('geometry: %sx%s+%s+%s' % (g['WIDTH'], g['HEIGHT'], g['X'], g['Y']))
            return
        click(int(g['X']) + int(g['WIDTH']) // 2, int(g['Y']) + int(g['HEIGHT']) // 2, button=1 if len(argv) == 3 else 2)
    else:
        sys.exit(__doc__)


if __name__ == '__main__':
    main(sys.argv)
