#!/usr/bin/python3
'''Acts as the person at the test desktop: reads what a dialog or notification
shows and answers it with the pointer, as a person does.

  person.py dialog TEXT          waits for the portal dialog showing TEXT; prints
                                 its labels, radio buttons and buttons, one per
                                 line, then "geometry: WxH+X+Y" of its window
  person.py click NAME           pointer click (xdotool) in the middle of the
                                 dialog's radio button or button called NAME;
                                 prints "clicked at SECONDS" (since 1970)
  person.py notification-shown   waits until dunst shows a notification; prints
                                 "geometry: WxH+X+Y" of its window
  person.py notification         middle-clicks dunst's notification, which opens
                                 dunst's menu of the notification's actions
  person.py notification close   left-clicks it, which closes it unanswered

Widgets are found through the accessibility tree (AT-SPI, as screen readers and
dogtail see them), which gives their place on the screen; the click itself is
a real pointer event. Exits 1 with a message when what it waits for does not
come within 60 s.
'''
import subprocess
import sys
import time

from dogtail.config import config
config.checkForA11y = False
config.logDebugToFile = False
config.logDebugToStdOut = False
config.searchShowingOnly = True
from dogtail import tree  # noqa: E402

APP = 'xdg-desktop-portal-gtk'
ROLES = ('label', 'radio button', 'push button', 'check box')
DEADLINE = time.monotonic() + 60


def widgets():
    try:
        app = tree.root.application(APP, retry=False)
    except Exception:
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
        result = predicate()
        if result:
            return result
        time.sleep(0.1)
    sys.exit('%s did not appear within 60 s' % what)


def click(x, y, button=1):
    '''Moves the pointer there and clicks; prints the wall-clock time of the click.'''
    subprocess.run(['xdotool', 'mousemove', '--sync', str(x), str(y)], check=True)
    at = time.time()
    subprocess.run(['xdotool', 'click', str(button)], check=True)
    print('clicked at %.6f' % at)


def main(argv):
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
