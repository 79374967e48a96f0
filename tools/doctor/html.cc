#include "doctor/html.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace stoker::doctor {
namespace {

const char* const kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b",
                               "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"};

std::string num(double v) {
  char b[32];
  if (std::fabs(v) >= 100 || v == std::floor(v)) {
    std::snprintf(b, sizeof(b), "%.0f", v);
  } else {
    std::snprintf(b, sizeof(b), "%.2g", v);
  }
  return b;
}

// A round step giving about `n` ticks over [0, max].
double tick_step(double max, int n) {
  const double raw = max / n, mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    if (raw <= m * mag) return m * mag;
  }
  return 10 * mag;
}

}  // namespace

std::string html_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      default: o += c;
    }
  }
  return o;
}

std::string svg_line_chart(const std::vector<ChartSeries>& series, const ChartOptions& o) {
  // The legend's width from its longest name (about 6.2 px a character at 11 px).
  std::size_t longest = 0;
  for (const auto& s : series) longest = std::max(longest, s.name.size());
  const double L = 60, R = std::clamp(26 + 6.2 * static_cast<double>(longest), 150.0, 340.0), T = 28, B = 40;
  const double W = o.width - L - R, H = o.height - T - B;
  double xmin = 1e300, xmax = -1e300, ymax = o.y_max;
  for (const auto& s : series) {
    for (double x : s.x) xmin = std::min(xmin, x), xmax = std::max(xmax, x);
    if (o.y_max <= 0) {
      for (double y : s.y) {
        if (std::isfinite(y)) ymax = std::max(ymax, y);
      }
    }
  }
  if (xmin > xmax) xmin = 0, xmax = 1;
  if (xmax <= xmin) xmax = xmin + 1;
  if (ymax <= 0) ymax = 1;
  const double ystep = tick_step(ymax, 4);
  ymax = std::ceil(ymax / ystep - 1e-9) * ystep;
  auto X = [&](double x) { return L + (x - xmin) / (xmax - xmin) * W; };
  auto Y = [&](double y) { return T + H - std::clamp(y, 0.0, ymax) / ymax * H; };
  char b[256];
  std::string svg;
  std::snprintf(b, sizeof(b),
                "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\">",
                o.width, o.height, o.width, o.height);
  svg += b;
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>";
  svg += "<text x=\"" + num(L) + "\" y=\"18\" font-size=\"14\" font-weight=\"bold\">" + html_escape(o.title) + "</text>";
  for (double y = 0; y <= ymax + 1e-9; y += ystep) {
    std::snprintf(b, sizeof(b), "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>", L, L + W, Y(y), Y(y));
    svg += b;
    std::snprintf(b, sizeof(b), "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">%s</text>", L - 6,
                  Y(y) + 4, num(y).c_str());
    svg += b;
  }
  const double xstep = tick_step(xmax - xmin, 6);
  for (double x = std::ceil(xmin / xstep) * xstep; x <= xmax + 1e-9; x += xstep) {
    std::snprintf(b, sizeof(b), "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\">%s</text>", X(x),
                  T + H + 16, num(x).c_str());
    svg += b;
  }
  std::snprintf(b, sizeof(b), "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#999\"/>",
                L, T, W, H);
  svg += b;
  svg += "<text x=\"" + num(L + W / 2) + "\" y=\"" + num(o.height - 6) +
         "\" font-size=\"11\" text-anchor=\"middle\">" + html_escape(o.x_label) + "</text>";
  std::snprintf(b, sizeof(b), "<text transform=\"translate(14,%.1f) rotate(-90)\" font-size=\"11\" text-anchor=\"middle\">",
                T + H / 2);
  svg += b + html_escape(o.y_label) + "</text>";
  for (std::size_t i = 0; i < series.size(); ++i) {
    const auto& s = series[i];
    const char* color = kColors[i % (sizeof(kColors) / sizeof(kColors[0]))];
    // A value that is not finite (NaN) breaks the line: the series was not running there.
    std::string pts;
    auto flush = [&] {
      if (!pts.empty()) {
        svg += std::string("<polyline fill=\"none\" stroke-width=\"2\" stroke=\"") + color + "\" points=\"" + pts + "\"/>";
      }
      pts.clear();
    };
    for (std::size_t k = 0; k < s.x.size() && k < s.y.size(); ++k) {
      if (!std::isfinite(s.y[k])) {
        flush();
        continue;
      }
      std::snprintf(b, sizeof(b), "%.1f,%.1f ", X(s.x[k]), Y(s.y[k]));
      pts += b;
    }
    flush();
    if (o.points) {
      for (std::size_t k = 0; k < s.x.size() && k < s.y.size(); ++k) {
        if (!std::isfinite(s.y[k])) continue;
        std::snprintf(b, sizeof(b), "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\"/>", X(s.x[k]), Y(s.y[k]), color);
        svg += b;
      }
    }
    std::snprintf(b, sizeof(b), "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"4\" fill=\"%s\"/>", L + W + 10,
                  T + 6 + 16.0 * static_cast<double>(i), color);
    svg += b;
    std::snprintf(b, sizeof(b), "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\">", L + W + 26, T + 11 + 16.0 * static_cast<double>(i));
    svg += b + html_escape(s.name) + "</text>";
  }
  return svg + "</svg>";
}

std::string svg_stacked_bars(const std::vector<std::string>& labels, const std::vector<std::string>& parts,
                             const std::vector<std::vector<double>>& values, const std::string& title,
                             const std::string& unit) {
  const int width = 760, row = 26, L = 220, R = 40, T = 46;
  const int height = T + row * static_cast<int>(labels.size()) + 10;
  double max = 0;
  for (const auto& v : values) {
    double sum = 0;
    for (double x : v) sum += x;
    max = std::max(max, sum);
  }
  if (max <= 0) max = 1;
  char b[300];
  std::snprintf(b, sizeof(b), "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\">", width, height);
  std::string svg = b;
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"#fff\"/><text x=\"10\" y=\"18\" font-size=\"14\" font-weight=\"bold\">" +
         html_escape(title) + "</text>";
  for (std::size_t p = 0; p < parts.size(); ++p) {
    std::snprintf(b, sizeof(b), "<rect x=\"%zu\" y=\"26\" width=\"12\" height=\"10\" fill=\"%s\"/><text x=\"%zu\" y=\"35\" font-size=\"11\">",
                  10 + p * 130, kColors[p % 10], 26 + p * 130);
    svg += b + html_escape(parts[p]) + "</text>";
  }
  for (std::size_t r = 0; r < labels.size(); ++r) {
    const double y = T + static_cast<double>(r) * row;
    std::snprintf(b, sizeof(b), "<text x=\"%d\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">", L - 8, y + 15);
    svg += b + html_escape(labels[r]) + "</text>";
    double x = L, total = 0;
    for (std::size_t p = 0; p < values[r].size(); ++p) {
      const double w = values[r][p] / max * (width - L - R);
      std::snprintf(b, sizeof(b), "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%d\" fill=\"%s\"/>", x, y + 3, w,
                    row - 8, kColors[p % 10]);
      svg += b;
      x += w;
      total += values[r][p];
    }
    std::snprintf(b, sizeof(b), "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\">%s %s</text>", x + 4, y + 15,
                  num(total).c_str(), html_escape(unit).c_str());
    svg += b;
  }
  return svg + "</svg>";
}

std::string html_page(const std::string& title, const std::string& body) {
  return "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>" + html_escape(title) +
         "</title><style>"
         "body{font-family:system-ui,sans-serif;margin:24px;max-width:1000px;color:#222}"
         "h1{font-size:22px}h2{font-size:17px;margin-top:28px}"
         ".verdict{font-size:20px;font-weight:bold;padding:12px 16px;border-radius:6px;background:#fff3cd;border:1px solid #e0c060}"
         ".verdict.compute{background:#d4edda;border-color:#6bbf7f}"
         "table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ccc;padding:4px 8px;text-align:left;font-size:13px}"
         "td.n{text-align:right}code,pre{background:#f4f4f4;padding:2px 4px}svg.chart{display:block;margin:10px 0}"
         "li{margin:3px 0}.note{color:#666;font-size:13px}"
         "</style></head><body>\n" +
         body + "\n</body></html>\n";
}

}  // namespace stoker::doctor
