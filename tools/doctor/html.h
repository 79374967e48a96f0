// Self-contained HTML pieces for the doctor's report and `stoker bench
// --sweep`: inline SVG charts (no script, no network), escaped text.
#pragma once

#include <string>
#include <vector>

namespace stoker::doctor {

struct ChartSeries {
  std::string name;
  std::vector<double> x, y;
};

struct ChartOptions {
  std::string title, x_label, y_label;
  double y_max = 0;  // 0: from the data
  bool points = false;
  int width = 760, height = 240;
};

// A line chart: one polyline per series (broken where a y is not finite: NaN marks a gap), axes with ticks,
// a legend.
std::string svg_line_chart(const std::vector<ChartSeries>& series, const ChartOptions& o);
// Horizontal stacked bars: one row per label, one segment per part.
std::string svg_stacked_bars(const std::vector<std::string>& labels, const std::vector<std::string>& parts,
                             const std::vector<std::vector<double>>& values, const std::string& title,
                             const std::string& unit);
std::string html_escape(const std::string& s);
// A whole page around `body`, with the report's stylesheet.
std::string html_page(const std::string& title, const std::string& body);

}  // namespace stoker::doctor
