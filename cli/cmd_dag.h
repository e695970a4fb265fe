/*
 * cmd_dag.h - `axctl dag validate FILE...` and `axctl dag load DIR`.
 */
#ifndef AX_CMD_DAG_H
#define AX_CMD_DAG_H

/*
 * `axctl dag load DIR`, also used by `axctl standalone` and `axctl bench`:
 * validates every *.yaml / *.yml of dir together and stores each valid DAG
 * and template (created / unchanged / updated lines on stdout, errors on
 * stderr). The database is resolved as by ax_db_where_init (an explicit
 * dsn is only connected to). Returns the exit status: 0 all stored, 1 any
 * error or no file.
 */
int ax_dag_load_dir(const char *dir, const char *home, const char *dsn);

/* `axctl dag ...`; argv[0] is "dag". Exit status 0 / 1 / 2. */
int ax_cmd_dag(int argc, char **argv);

#endif /* AX_CMD_DAG_H */
