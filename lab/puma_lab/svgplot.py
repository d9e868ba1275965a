# SPDX-License-Identifier: Apache-2.0
"""A line plot as a small standalone SVG, for figures kept in docs/.

``lines(series, step, ...)``: SERIES is {label: [y or None, ...]}, one
value every STEP units of x; None breaks a line.  No dependency beyond
the standard library, so the lab can draw what its benches measure.
"""

import html

COLORS = ('#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e')
W, H = 640, 320
LEFT, RIGHT, TOP, BOTTOM = 56, 150, 24, 44


def _ticks(top, n=4):
    raw = top / n
    mag = 10 ** len(str(int(raw))) / 10 if raw >= 1 else 1
    step = max(1, round(raw / mag)) * mag
    return [i * step for i in range(int(top / step) + 1)]


def lines(series, step, title, xlabel, ylabel, marks=()):
    """SVG text; MARKS are (x, label) vertical lines, e.g. the switchover."""
    values = [v for ys in series.values() for v in ys if v is not None]
    ymax = max(values + [1]) * 1.1
    xmax = max([len(ys) for ys in series.values()] + [2]) * step
    pw, ph = W - LEFT - RIGHT, H - TOP - BOTTOM

    def px(x):
        return LEFT + pw * x / xmax

    def py(y):
        return TOP + ph * (1 - y / ymax)

    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
           'font-family="sans-serif" font-size="11">' % (W, H),
           '<rect width="100%" height="100%" fill="white"/>',
           '<text x="%d" y="16" font-size="13">%s</text>'
           % (LEFT, html.escape(title))]
    for t in _ticks(ymax / 1.1):
        out.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/>'
                   '<text x="%d" y="%.1f" text-anchor="end">%g</text>'
                   % (LEFT, LEFT + pw, py(t), py(t), LEFT - 4, py(t) + 4, t))
    for t in _ticks(xmax):
        out.append('<text x="%.1f" y="%d" text-anchor="middle">%g</text>'
                   % (px(t), TOP + ph + 14, t))
    out.append('<rect x="%d" y="%d" width="%d" height="%d" fill="none" '
               'stroke="#444"/>' % (LEFT, TOP, pw, ph))
    out.append('<text x="%d" y="%d" text-anchor="middle">%s</text>'
               % (LEFT + pw / 2, H - 8, html.escape(xlabel)))
    out.append('<text x="14" y="%d" transform="rotate(-90 14 %d)" '
               'text-anchor="middle">%s</text>'
               % (TOP + ph / 2, TOP + ph / 2, html.escape(ylabel)))
    # Labels of several marks are staggered down so that close ones stay
    # readable.
    for i, (x, label) in enumerate(marks):
        out.append('<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#888" '
                   'stroke-dasharray="4 3"/><text x="%.1f" y="%d">%s</text>'
                   % (px(x), px(x), TOP, TOP + ph, px(x) + 3,
                      TOP + 12 + 12 * (i % 6), html.escape(label)))
    for i, (label, ys) in enumerate(series.items()):
        color = COLORS[i % len(COLORS)]
        run = []
        for j, y in enumerate(ys + [None]):
            if y is None:
                if len(run) > 1:
                    out.append('<polyline fill="none" stroke="%s" '
                               'stroke-width="2" points="%s"/>'
                               % (color, ' '.join(run)))
                elif run:
                    x0, y0 = run[0].split(',')
                    out.append('<circle cx="%s" cy="%s" r="2.5" fill="%s"/>'
                               % (x0, y0, color))
                run = []
            else:
                run.append('%.1f,%.1f' % (px(j * step), py(y)))
        ly = TOP + 14 + 16 * i
        out.append('<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="%s" '
                   'stroke-width="2"/><text x="%d" y="%d">%s</text>'
                   % (W - RIGHT + 10, W - RIGHT + 30, ly, ly, color,
                      W - RIGHT + 34, ly + 4, html.escape(label)))
    out.append('</svg>')
    return '\n'.join(out) + '\n'
