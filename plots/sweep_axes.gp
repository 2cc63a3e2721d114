# sweep_axes.gp: the categorical axes of the sweep heat maps. Loaded by
# sweep_needle.gp and sweep_recall.gp before style.gp. When the caller did not
# pass them, collects the distinct context lengths and needle depths of `data`
# (sorted), and defines length_index(v) / depth_index(v): the 1-based cell of a
# value (NaN when it is not on the axis, so the row is skipped).
#
# Variables: data (the CSV), and optionally lengths, depths (space-separated).

set datafile separator comma
set datafile columnheaders

# The sorted distinct values of one column, as a space-separated string.
if (!exists("lengths")) {
  set table $sweep_values
  plot data using "length":0 smooth unique
  unset table
  lengths = ""
  do for [i = 1:|$sweep_values|] { v = word($sweep_values[i], 1); if (strlen(v) > 0 && v[1:1] ne "#") { lengths = lengths . " " . v } }
}
if (!exists("depths")) {
  set table $sweep_values
  plot data using "depth":0 smooth unique
  unset table
  depths = ""
  do for [i = 1:|$sweep_values|] { v = word($sweep_values[i], 1); if (strlen(v) > 0 && v[1:1] ne "#") { depths = depths . " " . v } }
}
n_lengths = words(lengths)
n_depths = words(depths)
length_index(v) = (sum [i = 1:n_lengths] (abs(word(lengths, i) + 0 - v) < 1e-9 ? i : 0)) > 0 ? \
                  (sum [i = 1:n_lengths] (abs(word(lengths, i) + 0 - v) < 1e-9 ? i : 0)) : NaN
depth_index(v) = (sum [i = 1:n_depths] (abs(word(depths, i) + 0 - v) < 1e-9 ? i : 0)) > 0 ? \
                 (sum [i = 1:n_depths] (abs(word(depths, i) + 0 - v) < 1e-9 ? i : 0)) : NaN
