/* plan/plan_lp.c: the throughput bound as a linear program (GLPK) over the model's units: cores, sequential
 * threads, threads that wait, disk bandwidth, and the network (each remote reader's requests in flight, the link,
 * the read-ahead's memory). Plumber's LP, with no hand-off costs; plan_solve.c calls it for the plan, each cache
 * candidate and one core more. */
#include <glpk.h>
#include <math.h>
#include <stdbool.h>

#include "plan/plan_int.h"

/* The LP: maximise X subject to X*cost_u <= theta_u (each unit), theta_u <= cap_u (sequential threads and fixed
 * pools; tunable pools only by the total), sum theta_u <= C, X*b <= B, and X*serial <= 1 (SL_FN_SERIAL functions,
 * e.g. Python's, share one lock: one core for all of them, wherever they run). Each remote reader r adds q_r, its
 * requests in flight per file, in [1, its caps]: X*bpe_r <= S_r*q_r*B_r/(L_r + B_r/b_r) (Little's law over its S_r
 * files), X*sum bpe_r <= the link, and sum q_r*B_r*S_r <= the memory the floor and the cache leave. */
int sl__plan_lp(const sl_plan *P, int cache_at, double cache_bytes, double cores, double *Xout, const char **limit) {
  int64_t *par = sl__calloc((size_t)P->nops, sizeof *par);
  sl__pm_units U;
  if (!par || sl__plan_units_new(&U, P->nops)) {
    sl__free(par);
    return sl__oom("the LP");
  }
  for (int i = 0; i < P->nops; i++) {
    const sl__pm_op *o = &P->ops[i];
    par[i] = o->par_tunable ? -1 : o->par0;
  }
  sl__plan_units_build(P, par, cache_at, 0, &U); /* the bound: Plumber's LP, without hand-off costs */
  /* Costs below a picosecond per element are noise; dropping them keeps the matrix well scaled. */
  for (int k = 0; k < U.n; k++) {
    if (!(U.cost[k] >= 1e-12)) U.cost[k] = 0;
    if (!(U.tcost[k] >= 1e-12)) U.tcost[k] = 0;
  }
  if (!(U.b >= 1e-9)) U.b = 0;
  glp_term_out(GLP_OFF);
  glp_prob *lp = glp_create_prob();
  glp_set_obj_dir(lp, GLP_MAX);
  /* Units of fixed threads whose ops wait (I/O) get a row of their own: X * thread-time <= threads. */
  int nw = 0;
  for (int k = 0; k < U.n; k++)
    if (U.owner[k] < 0 && U.cap[k] > 0 && U.tcost[k] > U.cost[k] * 1.001) nw++;
  bool serial = U.serial >= 1e-12;
  /* The remote readers the LP prices (net[act[j]], column 2 + U.n + j), the link and the read-ahead's memory. */
  int nn = 0, *act = P->nnet ? sl__calloc((size_t)P->nnet, sizeof *act) : NULL;
  if (P->nnet && !act) {
    sl__plan_units_free(&U);
    sl__free(par);
    return sl__oom("the LP");
  }
  double bpe = 0, link = INFINITY, room = sl__plan_net_room(P, cache_bytes);
  for (int k = 0; k < P->nnet; k++)
    if (sl__plan_net_active(P, &P->net[k], cache_at)) {
      act[nn++] = k;
      bpe += P->net[k].bytes_per_elem;
      link = P->net[k].link;
    }
  bool has_link = nn && isfinite(link), has_mem = nn && isfinite(room);
  int nc = 1 + U.n + nn, nr = U.n + 2 + nw + (serial ? 1 : 0) + nn + has_link + has_mem;
  glp_add_cols(lp, nc);
  glp_add_rows(lp, nr);
  glp_set_col_bnds(lp, 1, GLP_DB, 0, SL__PLAN_X_MAX);
  glp_set_obj_coef(lp, 1, 1);
  for (int k = 0; k < U.n; k++) {
    double cap = U.owner[k] >= 0 ? cores : U.cap[k];
    if (cap > 0) glp_set_col_bnds(lp, 2 + k, GLP_DB, 0, cap);
    else glp_set_col_bnds(lp, 2 + k, GLP_FX, 0, 0);
  }
  for (int j = 0; j < nn; j++) { /* q_j: at least one request per file, at most the caps */
    const sl__pm_net *x = &P->net[act[j]];
    double qmax = sl__plan_net_qmax(x);
    if (qmax > 1) glp_set_col_bnds(lp, 2 + U.n + j, GLP_DB, 1, qmax);
    else glp_set_col_bnds(lp, 2 + U.n + j, GLP_FX, 1, 1);
  }
  int cap_ne = 3 * U.n + 5 + nw + 3 * nn + 1;
  int *ia = sl__calloc((size_t)cap_ne + 1, sizeof *ia), *ja = sl__calloc((size_t)cap_ne + 1, sizeof *ja);
  double *ar = sl__calloc((size_t)cap_ne + 1, sizeof *ar);
  if (!ia || !ja || !ar) {
    glp_delete_prob(lp);
    sl__plan_units_free(&U);
    sl__free(par);
    sl__free(ia);
    sl__free(ja);
    sl__free(ar);
    sl__free(act);
    return sl__oom("the LP");
  }
  int ne = 0;
  for (int k = 0; k < U.n; k++) { /* row k+1: X*cost_k - theta_k <= 0 */
    glp_set_row_bnds(lp, k + 1, GLP_UP, 0, 0);
    ne++, ia[ne] = k + 1, ja[ne] = 1, ar[ne] = U.cost[k];
    ne++, ia[ne] = k + 1, ja[ne] = 2 + k, ar[ne] = -1;
  }
  glp_set_row_bnds(lp, U.n + 1, GLP_UP, 0, cores); /* sum theta <= C */
  for (int k = 0; k < U.n; k++) ne++, ia[ne] = U.n + 1, ja[ne] = 2 + k, ar[ne] = 1;
  bool disk = P->B > 0 && U.b > 0;
  if (disk) {
    glp_set_row_bnds(lp, U.n + 2, GLP_UP, 0, P->B);
    ne++, ia[ne] = U.n + 2, ja[ne] = 1, ar[ne] = U.b;
  } else {
    glp_set_row_bnds(lp, U.n + 2, GLP_FR, 0, 0);
  }
  int row = U.n + 2;
  for (int k = 0; k < U.n; k++)
    if (U.owner[k] < 0 && U.cap[k] > 0 && U.tcost[k] > U.cost[k] * 1.001) {
      row++;
      glp_set_row_bnds(lp, row, GLP_UP, 0, U.cap[k]);
      ne++, ia[ne] = row, ja[ne] = 1, ar[ne] = U.tcost[k];
    }
  if (serial) {
    row++;
    glp_set_row_bnds(lp, row, GLP_UP, 0, 1);
    ne++, ia[ne] = row, ja[ne] = 1, ar[ne] = U.serial;
  }
  /* X - S q g / bpe <= 0: in elements/s, so the rows stay well scaled */
  for (int j = 0; j < nn; j++) {
    const sl__pm_net *x = &P->net[act[j]];
    row++;
    glp_set_row_bnds(lp, row, GLP_UP, 0, 0);
    ne++, ia[ne] = row, ja[ne] = 1, ar[ne] = 1;
    ne++, ia[ne] = row, ja[ne] = 2 + U.n + j, ar[ne] = -(double)x->streams * sl__plan_net_per_request(x) / x->bytes_per_elem;
  }
  if (has_link) { /* X <= link / sum bpe */
    row++;
    glp_set_row_bnds(lp, row, GLP_UP, 0, link / bpe);
    ne++, ia[ne] = row, ja[ne] = 1, ar[ne] = 1;
  }
  int mem_row = row + 1;
  if (has_mem) { /* the read-ahead's bytes, in MB */
    row++;
    glp_set_row_bnds(lp, row, GLP_UP, 0, room / 1e6);
    for (int j = 0; j < nn; j++)
      ne++, ia[ne] = row, ja[ne] = 2 + U.n + j, ar[ne] = P->net[act[j]].block * (double)P->net[act[j]].streams / 1e6;
  }
  glp_load_matrix(lp, ne, ia, ja, ar);
  glp_smcp parm;
  glp_init_smcp(&parm);
  parm.msg_lev = GLP_MSG_OFF;
  /* Bounded effort: this LP has a handful of rows; traces with extreme numbers must not make it spin. */
  parm.it_lim = 20000;
  parm.tm_lim = 2000;
  glp_scale_prob(lp, GLP_SF_AUTO);
  int rc = 0;
  int sr = glp_simplex(lp, &parm);
  if (sr != 0 || glp_get_status(lp) != GLP_OPT) {
    rc = sl__err(SL_ERROR, "the LP solver failed (glp_simplex %d, status %d)", sr, glp_get_status(lp));
  } else {
    double X = glp_get_col_prim(lp, 1);
    *Xout = X;
    const char *lim = "none";
    if (X < SL__PLAN_X_MAX * 0.999) {
      double used = 0;
      for (int k = 0; k < U.n; k++) used += glp_get_col_prim(lp, 2 + k);
      bool waits = false;
      for (int k = 0; k < U.n; k++)
        if (U.owner[k] < 0 && U.cap[k] > 0 && U.tcost[k] > U.cost[k] * 1.001 && X * U.tcost[k] >= U.cap[k] * 0.999)
          waits = true;
      /* The network limits when the link is full, or when a reader carries all its requests can and they are at
       * their caps or fill the memory left to them. */
      bool net = has_link && X * bpe >= link * 0.999;
      bool mem_full = has_mem && glp_get_row_prim(lp, mem_row) >= room / 1e6 * 0.999;
      for (int j = 0; j < nn && !net; j++) {
        const sl__pm_net *x = &P->net[act[j]];
        double q = glp_get_col_prim(lp, 2 + U.n + j), g = sl__plan_net_per_request(x);
        bool full = X * x->bytes_per_elem >= (double)x->streams * q * g * 0.999;
        net = full && (mem_full || q >= sl__plan_net_qmax(x) * 0.999);
      }
      if (disk && X * U.b >= P->B * 0.999) lim = "disk";
      else if (net) lim = "network";
      else if (serial && X * U.serial >= 0.999) lim = "serial";
      else if (waits) lim = "wait";
      else if (used >= cores * 0.999) lim = "cpu";
      else lim = "sequential";
    }
    if (limit) *limit = lim;
  }
  glp_delete_prob(lp);
  sl__free(ia);
  sl__free(ja);
  sl__free(ar);
  sl__plan_units_free(&U);
  sl__free(par);
  sl__free(act);
  return rc;
}


/* GLPK keeps its environment per thread: a thread other than the main one that solved LPs frees it before it
 * ends (else its buffers leak). */
void sl__plan_lp_thread_done(void) { glp_free_env(); }
