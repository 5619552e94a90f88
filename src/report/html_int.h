/* report/html_int.h: a small writer of self-contained HTML pages with inline SVG charts, shared by the trace report
 * (report_trace.c) and the provenance report (report_prov.c). What it writes is also well-formed XML (every
 * element closed, attributes quoted, text escaped, invalid UTF-8 replaced), uses no script and loads nothing.
 * Errors are sticky: the first failed append is kept in h->rc and later calls do nothing. */
#ifndef SL_REPORT_HTML_H
#define SL_REPORT_HTML_H

#include <stdbool.h>
#include <stddef.h>

#include "core/core_int.h"

typedef struct sl__html {
  sl__str s;
  int rc;
} sl__html;

/* Markup and numbers, printf-style: never pass outside strings through the format (use sl__h_text). */
void sl__h_raw(sl__html *h, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Text, escaped for element content and attribute values. */
void sl__h_text(sl__html *h, const char *text);
/* printf-style, then escaped as a whole. */
void sl__h_textf(sl__html *h, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The page: doctype, head (title, the shared stylesheet), <body><main>, and an <h1> with `title`. */
void sl__h_begin(sl__html *h, const char *title);
/* Closes the page and hands the text over in *out (free with sl_free), or returns the first error; the writer is
 * disposed either way. */
int sl__h_end(sl__html *h, char **out);

/* A summary card: a small caps key, a big value (id, when not NULL, on the value's element) and a note. */
void sl__h_card(sl__html *h, const char *key, const char *id, const char *value, const char *note);

/* <svg> of width x height (user units = CSS px at full size; the page scales it down on narrow screens) with an
 * accessible label; closed by sl__svg_end. */
void sl__svg_begin(sl__html *h, double width, double height, const char *cls, const char *label);
void sl__svg_end(sl__html *h);
/* Text at (x, y); anchor "start", "middle" or "end"; cls may be NULL. */
void sl__svg_text(sl__html *h, double x, double y, const char *anchor, const char *cls, const char *text);
/* A rectangle with a fill and an optional tooltip (<title>). */
void sl__svg_rect(sl__html *h, double x, double y, double w, double hgt, const char *fill, const char *tip);
void sl__svg_line(sl__html *h, double x1, double y1, double x2, double y2, const char *stroke, double width,
                  bool dashed);

/* `s` cut to at most `max` characters (UTF-8 aware; "..." ends a cut one) into b: for labels in a fixed width. */
const char *sl__fit(char *b, size_t n, const char *s, size_t max);

/* A linear axis from 0: a step giving about `want` ticks up to at least `max` (1, 2 or 5 x 10^k). */
double sl__nice_step(double max, int want);
/* A tick's label on a linear axis of that step: "0", whole numbers below 10k, else sl__fmt_si. */
const char *sl__fmt_tick(char *b, size_t n, double v, double step);

/* A horizontal bar chart: a row per bar (label on the left, the bar, a note after it) over a linear x axis from
 * 0, with vertical reference lines. */
typedef struct sl__hbar {
  const char *label;
  double value;     /* the bar's length in axis units */
  double part;      /* drawn over the bar from the left in part_fill (e.g. the wasted part of a total); < 0: none */
  const char *fill, *part_fill;
  const char *note; /* after the bar */
  const char *cls;  /* the row's <g> class (NULL: "bar") */
  const char *tip;  /* tooltip (NULL: label and note) */
} sl__hbar;
typedef struct sl__refline {
  double value;
  const char *label, *stroke;
  bool dashed;
} sl__refline;
typedef struct sl__hbar_chart {
  double width;       /* whole chart, px */
  double label_width; /* left column, px */
  double note_width;  /* right column, px */
  double row;         /* row height, px (bars are 70% of it) */
  const char *axis;   /* axis title */
  const char *aria;   /* the chart's label */
  const sl__refline *lines;
  size_t nlines;
} sl__hbar_chart;
void sl__svg_hbars(sl__html *h, const sl__hbar_chart *c, const sl__hbar *bars, size_t n);

/* A legend of coloured swatches on one row at (x, y). */
void sl__svg_legend(sl__html *h, double x, double y, const char *const *labels, const char *const *fills, size_t n);

#endif
