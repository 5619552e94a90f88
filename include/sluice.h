/* sluice.h: the umbrella header of libsluice. */
#ifndef SLUICE_H
#define SLUICE_H
#include "sluice/common.h"
#include "sluice/element.h"
#include "sluice/fn.h"
#include "sluice/pipeline.h"
#include "sluice/tfrecord.h"
#include "sluice/gen.h"
#include "sluice/convert.h"
#include "sluice/trace.h"
#include "sluice/plan.h"

#include "sluice/prov.h"
#include "sluice/prov_rq.h"
#include "sluice/report.h"
#include "sluice/dist.h"

#endif
