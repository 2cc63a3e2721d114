/* Where obcache finds the files it ships beside the binary: the figure scripts
 * (plots/NAME.gp) and the default model (models/). An installed obcache
 * (`make install PREFIX=DIR`: DIR/bin/obcache) reads them from
 * DIR/share/obcache, found from the binary's own path, so the installed tree
 * can be moved as a whole; any other binary (build/obcache, a test) reads them
 * from the source tree it was built from. */
#ifndef OBC_PATHS_H
#define OBC_PATHS_H

/* The installed data folder relative to the binary's folder (bin/). */
#define OBC_DATA_SUBDIR "share/obcache"

/* The folder holding plots/ and models/: PREFIX/share/obcache when the running
 * binary is PREFIX/bin/NAME and that folder exists, else the source tree
 * (OBC_SOURCE_DIR). Computed once; the text stays valid. */
const char *obc_data_dir(void);

#endif
