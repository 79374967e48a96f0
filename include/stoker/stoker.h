// Everything of stoker's public C++ API.
#pragma once

#include "stoker/fields.h"
#include "stoker/loader.h"
#include "stoker/names.h"
#include "stoker/options.h"
#include "stoker/source.h"
#include "stoker/stats.h"
#include "stoker/status.h"
#include "stoker/transforms.h"
#include "stoker/version.h"
