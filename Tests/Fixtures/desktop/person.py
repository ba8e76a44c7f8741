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
  person.py panel                waits up to 3 s until the panel's accessibility
                                 tree holds its tray (the plugin's widgets, which
                                 GTK 3 embeds there from the plugin's own process,
                                 and now and then fails to); prints "embedded",
                                 or exits 1
  person.py tray TITLE           waits until the panel's tray (xfce4-panel's
                                 systray) shows an item whose accessible name
                                 or tooltip holds TITLE, resting the pointer on
                                 each item to read its tooltip as a person does;
                                 prints "geometry: WxH+X+Y" of the item
  person.py tray TITLE click     the same, then left-clicks the item; prints
                                 "clicked at SECONDS" after the geometry
  person.py menu                 waits for the panel's popup menu (an item's
                                 menu) and moves the pointer over it; prints its
                                 items one per line, the name with
                                 " [insensitive]" after one that cannot be
                                 chosen, then "geometry: WxH+X+Y" of the menu
                                 (the topmost, when a submenu is open)
  person.py menu click NAME      clicks the item called NAME of an open menu
                                 (the topmost first; an item that opens a
                                 submenu opens it); prints "clicked at SECONDS"

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
from gi.repository import GLib  # noqa: E402

APP = 'xdg-desktop-portal-gtk'
ROLES = ('label', 'radio button', 'push button', 'check box')
DEADLINE = time.monotonic() + 60


def application(name):
    '''The accessible application called NAME, or None while it is not there.'''
    try:
        return tree.root.application(name, retry=False)
    except Exception:
        return None


def descendants(node, keep):
    '''Every accessible below NODE for which KEEP is true, in tree order.'''
    found = []

    def walk(node):
        try:
            children = node.children
        except Exception:
            return
        for c in children:
            if keep(c):
                found.append(c)
            walk(c)
    walk(node)
    return found


def widgets():
    app = application(APP)
    return [] if app is None else descendants(app, lambda c: c.roleName in ROLES and c.showing)


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


def mouse(x, y):
    '''Moves the pointer to (X, Y) and waits until it is there. xdotool's --sync waits for the
    pointer to move, which it never does when it is there already (xdotool gives up after 15 s).'''
    at = subprocess.run(['xdotool', 'getmouselocation', '--shell'], capture_output=True, text=True).stdout
    at = dict(line.split('=', 1) for line in at.split())
    if (at.get('X'), at.get('Y')) == (str(x), str(y)):
        return
    subprocess.run(['xdotool', 'mousemove', '--sync', str(x), str(y)], check=True)


def click(x, y, button=1):
    '''Moves the pointer there (xdotool) and clicks, pressing and releasing the button
    through XTEST as xdotool does, from this process so that the time is exact; prints the
    wall-clock time of the click: just before the release (what a button or a switch acts
    on) was sent, which the X server has taken in within the millisecond after.'''
    mouse(x, y)
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


# The tray is xfce4-panel's systray plugin. It runs in its own process (wrapper-2.0), whose
# widgets the accessibility tree shows inside the panel's (the plug in the panel's socket), so
# the tray's items are found under the application called 'xfce4-panel'.
PANEL = 'xfce4-panel'


class Watch:
    '''The AT-SPI events of TYPES from now on, as (type, source, detail1, role). GTK 3 places
    neither a tooltip nor a popup menu in its application's tree: their events are the way to
    them.'''

    def __init__(self, *types):
        self.events = []
        for t in types:
            pyatspi.Registry.registerEventListener(self.heard, t)
        # The applications learn of a new listener from the registry, a moment later.
        self.pump(0.3)

    def heard(self, event):
        try:
            self.events.append((str(event.type), event.source, event.detail1, event.source.getRoleName()))
        except Exception:
            pass  # gone already

    def pump(self, seconds):
        '''Takes in the events that come within SECONDS.'''
        context = GLib.MainContext.default()
        end = time.monotonic() + seconds
        while True:
            while context.pending():
                context.iteration(False)
            if time.monotonic() >= end:
                return
            time.sleep(0.02)


def geometry_of(node):
    (x, y), (w, h) = node.position, node.size
    return 'geometry: %dx%d+%d+%d' % (w, h, x, y)


def panel_frame():
    '''The panel's window in the accessibility tree, or None.'''
    app = application(PANEL)
    try:
        return next((c for c in app.children if c.showing), None) if app else None
    except Exception:
        return None


def tray_embedded():
    '''Whether the panel's window holds the plugin's (a window within it, from the plug).'''
    frame = panel_frame()
    if frame is None:
        return False

    def walk(node):
        try:
            return any(c.roleName == 'frame' or walk(c) for c in node.children)
        except Exception:
            return False
    return walk(frame)


def tray_items():
    '''The items the tray shows: the buttons on screen in the panel (which holds the tray alone).'''
    frame = panel_frame()
    return [] if frame is None else descendants(
        frame, lambda c: c.roleName == 'push button' and c.showing and c.size[0] > 0 and c.size[1] > 0)


def raise_panel():
    '''Brings the panel above other windows, where a window manager keeps a panel (no window
    manager runs on the test desktop, so a window opened later may lie over it).'''
    for win in subprocess.run(['xdotool', 'search', '--onlyvisible', '--classname', '^xfce4-panel$'],
                              capture_output=True, text=True).stdout.split():
        subprocess.run(['xdotool', 'windowraise', win])


def tooltip(item, watch, rest):
    '''The text of the tooltip ITEM shows once the pointer rests on it, or None when none comes
    within 3 s. The pointer goes to REST (the panel's empty end) first, so that the tooltip
    shows anew.'''
    mouse(*rest)
    watch.pump(0.2)
    del watch.events[:]
    (x, y), (w, h) = item.position, item.size
    mouse(x + w // 2, y + h // 2)
    end = time.monotonic() + 3
    while time.monotonic() < end:
        watch.pump(0.1)
        for kind, source, detail, role in watch.events:
            if role == 'tool tip' and (detail == 1 or kind.endswith('accessible-name')):
                try:
                    if source.getState().contains(pyatspi.STATE_SHOWING):
                        return source.name
                except Exception:
                    pass
    return None


def tray_item(title):
    '''The tray's item whose accessible name or tooltip holds TITLE. xfce4-panel 4.18 names
    its items' buttons nothing, so the pointer rests on each in turn to read its tooltip (the
    item's ToolTip title and text, or else its Title), as a person does to tell the icons
    apart.'''
    watch = Watch('object:state-changed:showing', 'object:state-changed:visible',
                  'object:property-change:accessible-name')
    seen = []

    def find():
        raise_panel()
        items = tray_items()
        seen[:] = ['(%d items)' % len(items)]
        for item in items:
            if any(title in text for text in (item.name, item.description) if text):
                return item
        frame = panel_frame()
        (fx, fy), (fw, fh) = frame.position, frame.size
        for item in items:
            tip = tooltip(item, watch, (fx + fw - 2, fy + fh // 2))
            seen.append(repr(tip))
            if tip and title in tip:
                return item
        return None
    return wait_for(find, lambda: 'a tray item showing %r (the tray shows: %s)' % (title, ', '.join(seen)))


def popup_menu_windows():
    '''The geometry (xdotool's WINDOW, X, Y, WIDTH, HEIGHT) of each of the panel's popup menus
    on screen, the last made (a submenu) first. The tray's menus are made in the plugin's
    process, wrapper-2.0, whose X resource ids grow with each window it makes.'''
    found = {}
    for win in subprocess.run(['xdotool', 'search', '--onlyvisible', '--classname', '^(wrapper-2\\.0|xfce4-panel)$'],
                              capture_output=True, text=True).stdout.split():
        kind = subprocess.run(['xprop', '-id', win, '_NET_WM_WINDOW_TYPE'], capture_output=True, text=True).stdout
        if '_NET_WM_WINDOW_TYPE_POPUP_MENU' in kind:
            geometry = subprocess.run(['xdotool', 'getwindowgeometry', '--shell', win],
                                      capture_output=True, text=True).stdout
            found[int(win)] = dict(line.split('=') for line in geometry.split())
    return [found[w] for w in sorted(found, reverse=True)]


def menu_of(source, role, g):
    '''The menu (its accessible) that SOURCE, the accessible of an AT-SPI event of ROLE, is or
    lies in, when that menu fills the window of geometry G; else None. In ATK an item that opens
    a submenu has the role "menu", as the menu itself does: the window's extents tell them apart.'''
    node = source if role in ('menu', 'menu item', 'check menu item', 'radio menu item') else None
    for _ in range(2):
        if node is None:
            return None
        try:
            (x, y), (w, h) = node.position, node.size
            if node.getRoleName() == 'menu' and abs(x - int(g['X'])) <= 2 and abs(y - int(g['Y'])) <= 2 \
                    and abs(w - int(g['WIDTH'])) <= 2 and abs(h - int(g['HEIGHT'])) <= 2:
                return node
            node = node.parent
        except Exception:
            return None
    return None


def open_menu(watch, g):
    '''The accessible of the popup menu in the window of geometry G, or None. The pointer moves
    down the middle of the menu, as a person's does over what it offers, until an item lights up
    (or one goes dark), whose event leads to the menu.'''
    x, y, w, h = int(g['X']), int(g['Y']), int(g['WIDTH']), int(g['HEIGHT'])
    del watch.events[:]
    for at in range(y + 4, y + h - 1, 6):
        mouse(x + w // 2, at)
        watch.pump(0.15)
        for _, source, _, role in watch.events:
            menu = menu_of(source, role, g)
            if menu is not None:
                return menu
    return None


def menu_items(menu):
    '''The items the menu shows (a separator is no item; one that opens a submenu is).'''
    return [c for c in menu.children if (c.roleName.endswith('menu item') or c.roleName == 'menu') and c.showing]


def menu(argv):
    watch = Watch('object:state-changed:selected', 'object:state-changed:focused')
    if argv == []:
        def topmost():
            windows = popup_menu_windows()
            if not windows:
                return None
            found = open_menu(watch, windows[0])
            return (found, windows[0]) if found is not None else None
        menu_node, g = wait_for(topmost, "the panel's popup menu")
        for item in menu_items(menu_node):
            sensitive = item.getState().contains(pyatspi.STATE_SENSITIVE)
            print(item.name + ('' if sensitive else ' [insensitive]'))
        print('geometry: %sx%s+%s+%s' % (g['WIDTH'], g['HEIGHT'], g['X'], g['Y']))
    elif len(argv) == 2 and argv[0] == 'click':
        shown = []

        def find():
            # Each open menu, the topmost first: the item may be in a submenu or in its parent.
            shown[:] = []
            for g in popup_menu_windows():
                found = open_menu(watch, g)
                if found is None:
                    continue
                items = menu_items(found)
                shown.extend(i.name for i in items)
                target = next((i for i in items if i.name == argv[1]), None)
                if target is not None:
                    return target
            return None
        target = wait_for(find, lambda: 'a menu item %r (the menus show: %s)' % (argv[1], ', '.join(shown)))
        (x, y), (w, h) = target.position, target.size
        click(x + w // 2, y + h // 2)
    else:
        sys.exit(__doc__)


def main(argv):
    if len(argv) >= 2 and argv[1] == 'settings':
        return settings(argv[2:])
    if argv[1:] == ['panel']:
        end = time.monotonic() + 3
        while not tray_embedded():
            if time.monotonic() > end:
                sys.exit("the panel's accessibility tree holds no tray")
            time.sleep(0.1)
        print('embedded')
        return
    if len(argv) in (3, 4) and argv[1] == 'tray' and argv[3:] in ([], ['click']):
        item = tray_item(argv[2])
        print(geometry_of(item))
        if argv[3:] == ['click']:
            (x, y), (w, h) = item.position, item.size
            click(x + w // 2, y + h // 2)
        return
    if len(argv) >= 2 and argv[1] == 'menu':
        return menu(argv[2:])
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
